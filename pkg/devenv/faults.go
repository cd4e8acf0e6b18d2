/*
Copyright The banlieue Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package devenv

import (
	"context"
)

// Fault injection: crashes (SIGKILL) and restarts of the environment's
// own servers, for the reliability tests.

// KillBanlieue stops every banlieue replica cleanly.
func (e *Env) KillBanlieue() {
	for i, p := range e.banlieue {
		if p != nil {
			p.stop()
			e.banlieue[i] = nil
		}
	}
}

// CrashBanlieue SIGKILLs every banlieue replica: a crash, with no graceful
// shutdown. StartBanlieue brings them back.
func (e *Env) CrashBanlieue() {
	for i := range e.banlieue {
		e.CrashBanlieueReplica(i)
	}
}

// RestartBanlieue stops every banlieue replica (SIGKILL) and starts them
// again on the same etcd with extra arguments after Config.BanlieueArgs
// (none: as configured), waiting until each is ready. PIDs changes.
func (e *Env) RestartBanlieue(ctx context.Context, extra ...string) error {
	e.CrashBanlieue()
	e.banlieueExtra = extra
	return e.StartBanlieue(ctx)
}

// CrashBanlieueReplica SIGKILLs replica i only.
func (e *Env) CrashBanlieueReplica(i int) {
	if i < len(e.banlieue) && e.banlieue[i] != nil {
		e.banlieue[i].kill()
		e.banlieue[i] = nil
	}
}

// CrashEtcd SIGKILLs every etcd member. StartEtcd brings them back on the
// same data.
func (e *Env) CrashEtcd() {
	for i := range e.etcd {
		e.CrashEtcdMember(i)
	}
}

// CrashEtcdMember SIGKILLs etcd member i only.
func (e *Env) CrashEtcdMember(i int) {
	if i < len(e.etcd) && e.etcd[i] != nil {
		e.etcd[i].kill()
		e.etcd[i] = nil
	}
}
