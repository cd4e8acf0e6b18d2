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

package kubectl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	banlieuev1alpha1 "github.com/firestoned/banlieue/pkg/generated/clientset/versioned/typed/banlieue/v1alpha1"
)

// nameTime is the UTC timestamp a default snapshot or restore name ends
// with: it sorts as the names do and reads as a time.
const nameTime = "20060102-150405"

// maxNameLength is a DNS subdomain's, the names' format.
const maxNameLength = 253

// snapshotOptions are the flags of snapshot.
type snapshotOptions struct {
	name    string
	memory  bool
	wait    bool
	timeout time.Duration
	list    bool
}

func newSnapshotCommand(cfg *config, streams Streams) *cobra.Command {
	o := &snapshotOptions{}
	cmd := &cobra.Command{
		Use:   "snapshot VM",
		Short: "Take a snapshot of a VM (a VirtualMachineSnapshot)",
		Long: `Creates a VirtualMachineSnapshot of the VM: its disks and, with --memory,
its running memory, kept by the backend the VM runs on. It is named
VM-YYYYMMDD-HHMMSS (UTC) unless --name names it. The API server refuses at
once, naming the field, a VM that does not exist or is not built yet, a
backend that takes no snapshots (or none with memory) and a VM that has as
many snapshots as its Provider allows. With --wait, waits until the
snapshot is ready to use; one that Failed, is Stale, reached the limit or is
Unsupported fails the command with its reason. --list shows the VM's
snapshots instead (kubectl banlieue snapshots VM).`,
		Example: `  kubectl banlieue snapshot db-01 --wait
  kubectl banlieue snapshot db-01 --name=before-upgrade --memory
  kubectl banlieue snapshot db-01 --list`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.list {
				for _, f := range []string{"name", "memory", "wait", "timeout"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--list shows the VM's snapshots: --%s does not go with it", f)
					}
				}
			}
			b, ns, err := cfg.namespaced()
			if err != nil {
				return err
			}
			if o.list {
				return listSnapshots(cmd.Context(), b, ns, streams, args[0])
			}
			return takeSnapshot(cmd.Context(), b.VirtualMachineSnapshots(ns), streams, args[0], o, time.Now())
		},
	}
	cmd.Flags().StringVar(&o.name, "name", "", "The VirtualMachineSnapshot's name (VM-YYYYMMDD-HHMMSS when empty).")
	cmd.Flags().BoolVar(&o.memory, "memory", false, "Keep the running VM's memory too, so a restore resumes it where it was.")
	cmd.Flags().BoolVar(&o.wait, "wait", false, "Wait until the snapshot is ready to use.")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long --wait waits.")
	cmd.Flags().BoolVar(&o.list, "list", false, "List the VM's snapshots instead of taking one.")
	return cmd
}

func newSnapshotsCommand(cfg *config, streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "snapshots VM",
		Short: "List a VM's snapshots",
		Long: `Show the VirtualMachineSnapshots of the VM, oldest first: whether each is
ready to use (a restore takes only those), its Ready condition's reason
(with the message while it is not ready), when the backend took it and
whether it holds the VM's memory.`,
		Example:           `  kubectl banlieue snapshots db-01 -n prod`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, ns, err := cfg.namespaced()
			if err != nil {
				return err
			}
			return listSnapshots(cmd.Context(), b, ns, streams, args[0])
		},
	}
}

// restoreOptions are the flags of restore.
type restoreOptions struct {
	name    string
	wait    bool
	timeout time.Duration
}

func newRestoreCommand(cfg *config, streams Streams) *cobra.Command {
	o := &restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore VM SNAPSHOT",
		Short: "Return a VM to one of its snapshots (a VirtualMachineRestore)",
		Long: `Creates a VirtualMachineRestore returning the VM to SNAPSHOT, one of its
VirtualMachineSnapshots. It is named VM-restore-YYYYMMDD-HHMMSS (UTC)
unless --name names it. The API server refuses at once, naming the field, a
VM or snapshot that does not exist, a snapshot of another VM, one not ready
to use or Stale, and a restore while another of the VM is not done. The
provider powers a running VM off first when its backend reverts only
stopped VMs. With --wait, prints each phase until the restore is Done; a
restore that Failed, or whose outcome is Unknown (the provider stopped
while asking: it does not ask again), fails the command with its message.`,
		Example: `  kubectl banlieue restore db-01 db-01-20261205-061700 --wait
  kubectl banlieue restore db-01 before-upgrade --name=rollback-42`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeRestore(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, ns, err := cfg.namespaced()
			if err != nil {
				return err
			}
			return restore(cmd.Context(), b.VirtualMachineRestores(ns), streams, args[0], args[1], o, time.Now())
		},
	}
	cmd.Flags().StringVar(&o.name, "name", "", "The VirtualMachineRestore's name (VM-restore-YYYYMMDD-HHMMSS when empty).")
	cmd.Flags().BoolVar(&o.wait, "wait", false, "Wait until the restore is Done.")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long --wait waits.")
	return cmd
}

// namespaced is the typed client with the namespace in effect.
func (c *config) namespaced() (banlieuev1alpha1.BanlieueV1alpha1Interface, string, error) {
	ns, err := c.Namespace()
	if err != nil {
		return nil, "", err
	}
	b, err := c.banlieue()
	if err != nil {
		return nil, "", err
	}
	return b, ns, nil
}

// defaultName is base-YYYYMMDD-HHMMSS at now (UTC); when that would be
// too long a name, base- as a generateName instead (the server cuts it
// and adds a random suffix).
func defaultName(base string, now time.Time) (name, generateName string) {
	name = base + "-" + now.UTC().Format(nameTime)
	if len(name) > maxNameLength {
		return "", base + "-"
	}
	return name, ""
}

func takeSnapshot(ctx context.Context, snaps banlieuev1alpha1.VirtualMachineSnapshotInterface, streams Streams, vm string, o *snapshotOptions, now time.Time) error {
	s := &v1alpha1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: o.name},
		Spec: v1alpha1.VirtualMachineSnapshotSpec{VMName: vm, IncludeMemory: o.memory}}
	if s.Name == "" {
		s.Name, s.GenerateName = defaultName(vm, now)
	}
	created, err := snaps.Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	name := created.Name
	fmt.Fprintf(streams.Out, "virtualmachinesnapshot.banlieue.io/%s created\n", name)
	if !o.wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	f := &snapshotFollower{}
	last, err := untilSnapshot(ctx, snaps, name, func(s *v1alpha1.VirtualMachineSnapshot) (bool, error) {
		if line := f.progress(s); line != "" {
			fmt.Fprintf(streams.Out, "virtualmachinesnapshot.banlieue.io/%s %s\n", name, line)
		}
		return snapshotSettled(s)
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("timed out after %s waiting for snapshot %s of virtualmachine %s to be ready: it is %s", o.timeout, name, vm, snapshotState(last))
		}
		return err
	}
	what := "disks only"
	if last.Status.Memory {
		what = "with memory"
	}
	fmt.Fprintf(streams.Out, "virtualmachinesnapshot.banlieue.io/%s is Ready (%s)\n", name, what)
	return nil
}

// snapshotFollower prints a snapshot's Ready condition as it changes,
// until it settles.
type snapshotFollower struct{ last string }

// progress is a line for a new reason or message while the snapshot is
// not settled ("" otherwise).
func (f *snapshotFollower) progress(s *v1alpha1.VirtualMachineSnapshot) string {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SnapshotReady)
	if s.Status.ReadyToUse || c == nil || snapshotFailed(c.Reason) {
		return ""
	}
	line := reasonText(c.Reason, c.Message)
	if line == f.last {
		return ""
	}
	f.last = line
	return line
}

// snapshotFailed: a Ready reason that waiting does not change.
func snapshotFailed(reason string) bool {
	switch reason {
	case v1alpha1.SnapshotReasonFailed, v1alpha1.SnapshotReasonStale, v1alpha1.SnapshotReasonLimitReached, v1alpha1.SnapshotReasonUnsupported:
		return true
	}
	return false
}

// snapshotSettled: ready to use (nil), or a reason it will not be, as the
// error.
func snapshotSettled(s *v1alpha1.VirtualMachineSnapshot) (bool, error) {
	if s.Status.ReadyToUse {
		return true, nil
	}
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SnapshotReady)
	if c != nil && snapshotFailed(c.Reason) {
		return true, fmt.Errorf("snapshot %s of virtualmachine %s is %s", s.Name, s.Spec.VMName, reasonText(c.Reason, c.Message))
	}
	return false, nil
}

// snapshotState is the Ready condition as a phrase for a timeout.
func snapshotState(s *v1alpha1.VirtualMachineSnapshot) string {
	if s == nil {
		return "not seen yet"
	}
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SnapshotReady)
	if c == nil {
		return "not taken up yet (no Ready condition)"
	}
	return reasonText(c.Reason, c.Message)
}

func restore(ctx context.Context, restores banlieuev1alpha1.VirtualMachineRestoreInterface, streams Streams, vm, snapshot string, o *restoreOptions, now time.Time) error {
	r := &v1alpha1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: o.name},
		Spec: v1alpha1.VirtualMachineRestoreSpec{VMName: vm, SnapshotName: snapshot}}
	if r.Name == "" {
		r.Name, r.GenerateName = defaultName(vm+"-restore", now)
	}
	created, err := restores.Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	name := created.Name
	fmt.Fprintf(streams.Out, "virtualmachinerestore.banlieue.io/%s created\n", name)
	if !o.wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	f := &restoreFollower{}
	last, err := untilRestore(ctx, restores, name, func(r *v1alpha1.VirtualMachineRestore) (bool, error) {
		if line := f.progress(r); line != "" {
			fmt.Fprintf(streams.Out, "virtualmachinerestore.banlieue.io/%s %s\n", name, line)
		}
		return restoreSettled(r)
	})
	if err != nil {
		if ctx.Err() != nil {
			state := "not seen yet"
			if last != nil {
				state = reasonText(orNone(string(last.Status.Phase)), last.Status.Message)
			}
			return fmt.Errorf("timed out after %s waiting for restore %s of virtualmachine %s to snapshot %s: it is %s",
				o.timeout, name, vm, snapshot, state)
		}
		return err
	}
	fmt.Fprintf(streams.Out, "virtualmachinerestore.banlieue.io/%s is Done: virtualmachine %s is at snapshot %s\n", name, vm, snapshot)
	return nil
}

// restoreFollower prints a restore's phase as it changes, until it
// settles.
type restoreFollower struct{ last string }

// progress is a line for a new phase or message of an unsettled restore
// ("" otherwise, and for Pending before the controller says anything).
func (f *restoreFollower) progress(r *v1alpha1.VirtualMachineRestore) string {
	p := r.Status.Phase
	if p == "" || restoreOver(p) || p == v1alpha1.RestorePending && r.Status.Message == "" {
		return ""
	}
	line := reasonText(string(p), r.Status.Message)
	if line == f.last {
		return ""
	}
	f.last = line
	return line
}

// restoreOver: the phases that end a restore.
func restoreOver(p v1alpha1.RestorePhase) bool {
	return p == v1alpha1.RestoreDone || p == v1alpha1.RestoreFailed || p == v1alpha1.RestoreUnknown
}

// restoreSettled: Done (nil), or Failed or Unknown with its message as
// the error.
func restoreSettled(r *v1alpha1.VirtualMachineRestore) (bool, error) {
	switch r.Status.Phase {
	case v1alpha1.RestoreDone:
		return true, nil
	case v1alpha1.RestoreFailed, v1alpha1.RestoreUnknown:
		return true, fmt.Errorf("restore %s of virtualmachine %s to snapshot %s is %s", r.Name, r.Spec.VMName, r.Spec.SnapshotName,
			reasonText(string(r.Status.Phase), r.Status.Message))
	}
	return false, nil
}

// listSnapshots prints the VM's snapshots as a table, oldest first.
func listSnapshots(ctx context.Context, b banlieuev1alpha1.BanlieueV1alpha1Interface, ns string, streams Streams, vm string) error {
	// A wrong name fails as kubectl get does (NotFound), not as an empty
	// list.
	if _, err := b.VirtualMachines(ns).Get(ctx, vm, metav1.GetOptions{}); err != nil {
		return err
	}
	snaps, err := snapshotsOf(ctx, b.VirtualMachineSnapshots(ns), vm)
	if err != nil {
		return err
	}
	if len(snaps) == 0 {
		fmt.Fprintf(streams.ErrOut, "No snapshots of virtualmachine %s found in %s namespace.\n", vm, ns)
		return nil
	}
	return printSnapshots(streams.Out, snaps)
}

// snapshotsOf lists the VM's snapshots (spec.vmName), oldest first.
func snapshotsOf(ctx context.Context, snaps banlieuev1alpha1.VirtualMachineSnapshotInterface, vm string) ([]v1alpha1.VirtualMachineSnapshot, error) {
	list, err := snaps.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.vmName", vm).String()})
	if err != nil {
		return nil, err
	}
	items := list.Items[:0]
	for _, s := range list.Items {
		// The server selects by spec.vmName; a client that does not
		// (a fake) is held to it here.
		if s.Spec.VMName == vm {
			items = append(items, s)
		}
	}
	sort.SliceStable(items, func(i, j int) bool {
		ti, tj := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return items[i].Name < items[j].Name
	})
	return items, nil
}

func printSnapshots(w io.Writer, snaps []v1alpha1.VirtualMachineSnapshot) error {
	return table(w, snapshotRows(snaps))
}

// snapshotRows: NAME READY REASON CREATED MEMORY; the reason with its
// message while the snapshot is not ready to use; the creation time and
// whether it holds memory once the backend took it ("-" before).
func snapshotRows(snaps []v1alpha1.VirtualMachineSnapshot) [][]string {
	rows := [][]string{{"NAME", "READY", "REASON", "CREATED", "MEMORY"}}
	for _, s := range snaps {
		reason := "-"
		if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SnapshotReady); c != nil {
			reason = c.Reason
			if !s.Status.ReadyToUse {
				reason = reasonText(c.Reason, c.Message)
			}
		}
		created, memory := "-", "-"
		if t := s.Status.CreationTime; t != nil {
			created, memory = t.UTC().Format(time.RFC3339), yesNo(s.Status.Memory)
		}
		rows = append(rows, []string{s.Name, yesNo(s.Status.ReadyToUse), reason, created, memory})
	}
	return rows
}

// completeRestore completes restore's arguments: the VM, then the names
// of its snapshots a restore takes (ready to use, not being deleted).
func completeRestore(cfg *config) cobra.CompletionFunc {
	vms := completeVMs(cfg)
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return vms(cmd, args, prefix)
		case 1:
		default:
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		b, ns, err := cfg.namespaced()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		snaps, err := snapshotsOf(cmd.Context(), b.VirtualMachineSnapshots(ns), args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return restorableNames(snaps, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}

// restorableNames are the names, starting with prefix, of the snapshots a
// restore takes.
func restorableNames(snaps []v1alpha1.VirtualMachineSnapshot, prefix string) []string {
	names := []string{}
	for _, s := range snaps {
		if s.Status.ReadyToUse && s.DeletionTimestamp == nil && strings.HasPrefix(s.Name, prefix) {
			names = append(names, s.Name)
		}
	}
	return names
}

// untilSnapshot watches the snapshot named name until cond holds,
// returning the last version seen (also when ctx ends first).
func untilSnapshot(ctx context.Context, snaps banlieuev1alpha1.VirtualMachineSnapshotInterface, name string, cond func(*v1alpha1.VirtualMachineSnapshot) (bool, error)) (*v1alpha1.VirtualMachineSnapshot, error) {
	var last *v1alpha1.VirtualMachineSnapshot
	err := untilNamed(ctx, "virtualmachinesnapshot", name, &v1alpha1.VirtualMachineSnapshot{}, snaps,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return snaps.List(ctx, opts)
		},
		snaps.Watch,
		func(obj runtime.Object) (bool, error) {
			s, ok := obj.(*v1alpha1.VirtualMachineSnapshot)
			if !ok {
				return false, nil
			}
			last = s
			return cond(s)
		})
	return last, err
}

// untilRestore watches the restore named name until cond holds, returning
// the last version seen (also when ctx ends first).
func untilRestore(ctx context.Context, restores banlieuev1alpha1.VirtualMachineRestoreInterface, name string, cond func(*v1alpha1.VirtualMachineRestore) (bool, error)) (*v1alpha1.VirtualMachineRestore, error) {
	var last *v1alpha1.VirtualMachineRestore
	err := untilNamed(ctx, "virtualmachinerestore", name, &v1alpha1.VirtualMachineRestore{}, restores,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return restores.List(ctx, opts)
		},
		restores.Watch,
		func(obj runtime.Object) (bool, error) {
			r, ok := obj.(*v1alpha1.VirtualMachineRestore)
			if !ok {
				return false, nil
			}
			last = r
			return cond(r)
		})
	return last, err
}

// untilNamed lists and watches the object of kind named name (objType
// its type) through client until cond holds. Its deletion meanwhile is
// an error.
func untilNamed(ctx context.Context, kind, name string, objType runtime.Object, client any,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	cond func(runtime.Object) (bool, error)) error {
	// client-go's reflector logs a list or watch that fails, such as one
	// in flight when the wait's time runs out, above the wait's own
	// message; the wait says what it saw last, so its informer is silent.
	ctx = klog.NewContext(ctx, logr.Discard())
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return watchFn(ctx, opts)
		},
	}
	// A client that says it has no watch-list semantics (a fake) is
	// listed, then watched.
	_, err := watchtools.UntilWithSync(ctx, cache.ToListWatcherWithWatchListSemantics(lw, client), objType, nil, func(ev watch.Event) (bool, error) {
		m, err := meta.Accessor(ev.Object)
		if err != nil || m.GetName() != name {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("%s %s was deleted", kind, name)
		}
		return cond(ev.Object)
	})
	return err
}
