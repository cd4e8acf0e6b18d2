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

// The logs of pods as files, as process mode keeps its processes' logs,
// for logscan: a pod deleted or a container restarted takes its log out
// of kubectl's reach, the copy stays.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// podLogPoll is how often the pods are listed for containers to copy.
const podLogPoll = 500 * time.Millisecond

// containerRun is one run of a container: its restart count tells it from
// the runs before it.
type containerRun struct {
	pod, container string
	restart        int32
}

// file is where run's log goes: prefix-POD-CONTAINER-RESTART.log in dir.
func (r containerRun) file(dir, prefix string) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%s-%s-%d.log", prefix, r.pod, r.container, r.restart))
}

// logReader opens a container's log: the current run's, followed as it
// is written when follow is set, or the previous run's.
type logReader func(ctx context.Context, pod, container string, previous, follow bool) (io.ReadCloser, error)

// runsToCopy returns the runs of p's containers (init containers too)
// whose logs are not copied yet and can be read: each container's current
// run once it has started (to follow), and the run before it (to read
// whole) when the container restarted since. Runs older than that are
// gone from the kubelet as well.
func runsToCopy(p *corev1.Pod, copied map[containerRun]bool) (follow, previous []containerRun) {
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		current := containerRun{p.Name, s.Name, s.RestartCount}
		if s.State.Running != nil || s.State.Terminated != nil {
			if !copied[current] {
				follow = append(follow, current)
			}
		}
		if before := (containerRun{p.Name, s.Name, s.RestartCount - 1}); s.RestartCount > 0 && !copied[before] {
			previous = append(previous, before)
		}
	}
	return follow, previous
}

// podLogCopier copies pods' logs into dir as the runs appear.
type podLogCopier struct {
	dir, prefix string
	read        logReader
	wg          sync.WaitGroup
	copied      map[containerRun]bool
}

// copyPods starts copying every run of pods not copied yet: the current
// runs in the background (their logs grow until they end), the previous
// ones at once. A run whose log cannot be opened yet is tried again on
// the next call.
func (c *podLogCopier) copyPods(ctx context.Context, pods []corev1.Pod) {
	for i := range pods {
		follow, previous := runsToCopy(&pods[i], c.copied)
		for _, r := range previous {
			if err := c.copyRun(ctx, r, true, false); err != nil {
				klog.V(2).InfoS("Reading a previous container's log", "pod", r.pod, "container", r.container, "err", err)
				continue
			}
			c.copied[r] = true
		}
		for _, r := range follow {
			rc, err := c.read(ctx, r.pod, r.container, false, true)
			if err != nil {
				klog.V(2).InfoS("Following a container's log", "pod", r.pod, "container", r.container, "err", err)
				continue
			}
			c.copied[r] = true
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				if err := c.write(r, rc); err != nil && ctx.Err() == nil {
					klog.ErrorS(err, "Copying a container's log", "pod", r.pod, "container", r.container)
				}
			}()
		}
	}
}

// copyRun copies one run's log whole.
func (c *podLogCopier) copyRun(ctx context.Context, r containerRun, previous, follow bool) error {
	rc, err := c.read(ctx, r.pod, r.container, previous, follow)
	if err != nil {
		return err
	}
	return c.write(r, rc)
}

// write copies rc to r's file until rc ends, and closes it.
func (c *podLogCopier) write(r containerRun, rc io.ReadCloser) error {
	defer rc.Close()
	f, err := os.Create(r.file(c.dir, c.prefix))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return f.Close()
}

// FollowPodLogs copies into dir, as they are written, the logs of every
// container of the pods in namespace that selector picks, one file per
// container run named prefix-POD-CONTAINER-RESTART.log: what logscan
// reads (glob prefix+"-*"). A pod's file stays when the pod goes; a
// restarted container's previous run is read whole. The returned stop
// ends the copying and waits until the files are written; call it before
// scanning them for the last time (the copies end by themselves when the
// environment stops).
func (e *Env) FollowPodLogs(namespace, selector, dir, prefix string) (stop func(), err error) {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return nil, err
	}
	c := &podLogCopier{dir: dir, prefix: prefix, copied: map[containerRun]bool{},
		read: func(ctx context.Context, pod, container string, previous, follow bool) (io.ReadCloser, error) {
			return cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous, Follow: follow}).Stream(ctx)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return // the API server may be going: the copies end with it
			}
			c.copyPods(ctx, pods.Items)
		}, podLogPoll)
	}()
	return func() {
		cancel()
		<-done
		c.wg.Wait()
	}, nil
}

// PodLogs is the folder FollowLogs copies pods' logs into, beside the
// environment's process logs (kept with them when a suite fails).
func (e *Env) PodLogs() string { return filepath.Join(e.Logs(), "pods") }

// FollowLogs is FollowPodLogs into PodLogs until the environment stops.
func (e *Env) FollowLogs(namespace, selector, prefix string) error {
	if err := os.MkdirAll(e.PodLogs(), 0o755); err != nil {
		return err
	}
	stop, err := e.FollowPodLogs(namespace, selector, e.PodLogs(), prefix)
	if err != nil {
		return err
	}
	e.logCopies = append(e.logCopies, stop)
	return nil
}
