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
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/devenv/logscan"
)

// TestPodLogCopier: on crafted pods, every started container run is
// copied once to a file of its own (init containers too), a restarted
// container's previous run is read whole, a container still waiting is
// not read, and a conflict logged only by a previous run, in a pod since
// deleted, is what logscan then finds.
func TestPodLogCopier(t *testing.T) {
	const conflict = `E1204 controller.go:1 "Reconciler error" err="Operation cannot be fulfilled: the object has been modified"`
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "main", State: running}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: running, RestartCount: 2}, {Name: "side", State: waiting}},
		}},
	}
	logs := map[string]string{
		"a/init/current": "I init done\n", "a/main/current": "I leading\n",
		"b/main/previous": conflict + "\n", "b/main/current": "I standby\n",
	}
	var reads []string
	dir := t.TempDir()
	c := &podLogCopier{dir: dir, prefix: "controller", copied: map[containerRun]bool{},
		read: func(_ context.Context, pod, container string, previous, follow bool) (io.ReadCloser, error) {
			key := pod + "/" + container + map[bool]string{true: "/previous", false: "/current"}[previous]
			if previous == follow {
				return nil, fmt.Errorf("%s: follow %v", key, follow)
			}
			reads = append(reads, key)
			return io.NopCloser(strings.NewReader(logs[key])), nil
		}}
	// Listed twice: nothing is read again. Pod b is gone the second time;
	// its files stay.
	c.copyPods(context.Background(), pods)
	c.copyPods(context.Background(), pods[:1])
	c.wg.Wait()

	slices.Sort(reads)
	if want := []string{"a/init/current", "a/main/current", "b/main/current", "b/main/previous"}; !slices.Equal(reads, want) {
		t.Errorf("read %v, want %v", reads, want)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for i := range files {
		files[i] = filepath.Base(files[i])
	}
	if want := []string{"controller-a-init-0.log", "controller-a-main-0.log", "controller-b-main-1.log", "controller-b-main-2.log"}; !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "controller-b-main-1.log")); err != nil || string(data) != conflict+"\n" {
		t.Errorf("previous run's file: %q %v", data, err)
	}
	if err := logscan.NoConflictErrors(dir, "controller-*"); err == nil || !strings.Contains(err.Error(), "1 conflicts") {
		t.Errorf("NoConflictErrors on copies holding one conflict: %v", err)
	}
}
