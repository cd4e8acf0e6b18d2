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

package capi

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	clusterreconciler "sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	machinereconciler "sigs.k8s.io/cluster-api/core/reconcilers/machine"
	mdreconciler "sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	msreconciler "sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/index"

	banlieuev1alpha1 "github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
)

var (
	env    *devenv.Env
	c      client.Client
	scheme = runtime.NewScheme()
	root   string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run runs the package in pod mode (devenv.NodeSuite): the shipped
// controller and the three providers' Deployments run as pods of the
// release image on a real node for the whole package (install), and
// Cluster API's own reconcilers in the test process (startCAPI), stopped
// before the environment. TestMain fails when a pod logged a lost
// optimistic-concurrency race as a reconcile error.
func run(m *testing.M) int {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme, banlieuev1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	root, _ = filepath.Abs(filepath.Join("..", ".."))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mgrDone <-chan struct{}
	return devenv.NodeSuite{Name: "capi", Root: root, Config: devenv.Config{Setup: dev.InstallRBAC}, ScanPodLogs: true,
		Ready: func(e *devenv.Env) error {
			env = e
			// Cluster API's logs go next to the environment's.
			logToFile(filepath.Join(env.Logs(), "capi-controllers.log"))
			if err := installCRDs(ctx); err != nil {
				return fmt.Errorf("CRDs: %w", err)
			}
			if err := install(ctx); err != nil {
				return err
			}
			var err error
			if mgrDone, err = startCAPI(ctx); err != nil {
				return fmt.Errorf("Cluster API's controllers: %w", err)
			}
			return nil
		},
		// Cluster API's controllers first, then the control plane they talk to.
		Stop: func() error {
			cancel()
			if mgrDone != nil {
				<-mgrDone
			}
			return nil
		}}.Run(m)
}

// providerSettings are what this package changes of each shipped
// provider's ConfigMap, as its administrator would (each key a flag's
// default): inventories walked every 2s rather than 5m, so that a
// Provider a test creates is Ready within its deadlines; the libvirt
// provider's domains of type qemu (this machine has no working KVM), and
// a soft power-off waiting at most 20s rather than 2m for the guest (one
// still booting under TCG answers no ACPI request) before its domain is
// destroyed; Proxmox VE tasks
// polled every 50ms rather than 500ms, so clones settle fast.
var providerSettings = map[string]string{
	"libvirt": `{"data":{"BANLIEUE_RESYNC":"2s","BANLIEUE_DOMAIN_TYPE":"qemu","BANLIEUE_SHUTDOWN_GRACE":"20s"}}`,
	"proxmox": `{"data":{"BANLIEUE_RESYNC":"2s","BANLIEUE_TASK_POLL":"50ms"}}`,
	"vsphere": `{"data":{"BANLIEUE_RESYNC":"2s"}}`,
}

// install copies the banlieue pods' logs from then on (env.FollowLogs),
// applies the shipped controller Deployment and each provider's
// configuration (edited: providerSettings) and Deployment, and waits for
// their rollouts. One Deployment of each serves every test: each test
// makes its own Providers and namespaces, and deletes its Providers.
func install(ctx context.Context) error {
	if err := env.FollowLogs(devenv.Namespace, "app.kubernetes.io/name=banlieue", "pod"); err != nil {
		return err
	}
	controller := filepath.Join(root, "artifacts", "deploy", "base", "deployment-controller.yaml")
	if out, err := env.Kubectl("", "apply", "-f", controller); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	deployments := []string{"banlieue-controller"}
	for _, backend := range []string{"libvirt", "proxmox", "vsphere"} {
		if err := env.ApplyProvider(root, backend, providerSettings[backend]); err != nil {
			return err
		}
		deployments = append(deployments, "banlieue-provider-"+backend)
	}
	return env.RolledOut(ctx, devenv.Namespace, 2*time.Minute, deployments...)
}

// installCRDs installs Cluster API's CRDs from its module and ours from
// artifacts/crds (the generated files, as shipped), and waits until every
// one is Established.
func installCRDs(ctx context.Context) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		return fmt.Errorf("locating the cluster-api module: %w", err)
	}
	capiCRDs := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
	if _, err := os.Stat(capiCRDs); err != nil {
		capiCRDs = filepath.Join(strings.TrimSpace(string(out)), "core", "config", "crd", "bases")
	}
	for _, dir := range []string{capiCRDs, filepath.Join(root, "artifacts", "crds")} {
		fsys := os.DirFS(dir)
		names, err := devenv.YAMLFiles(fsys, ".")
		if err != nil {
			return err
		}
		if err := devenv.ApplyFiles(ctx, env.Admin, fsys, names...); err != nil {
			return err
		}
	}
	var err2 error
	c, err2 = client.New(env.Admin, client.Options{Scheme: scheme})
	if err2 != nil {
		return err2
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var crds apiextensionsv1.CustomResourceDefinitionList
		if err := c.List(ctx, &crds); err != nil {
			return false, nil
		}
		for _, crd := range crds.Items {
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		return len(crds.Items) > 3, nil
	})
}

// startCAPI runs Cluster API's own Cluster, Machine, MachineSet and
// MachineDeployment reconcilers in-process against the environment.
func startCAPI(ctx context.Context) (<-chan struct{}, error) {
	mgr, err := ctrl.NewManager(env.Admin, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  setup.ManagerCacheOptions(scheme, "banlieue-capi-test", "", 10*time.Minute),
		Client:                 setup.ManagerClientOptions(),
	})
	if err != nil {
		return nil, err
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, err
	}
	secretClient, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, err
	}
	cache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretClient,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions("banlieue-capi-test", 20, 30),
	}, controller.Options{MaxConcurrentReconciles: 2})
	if err != nil {
		return nil, err
	}
	opts := controller.Options{MaxConcurrentReconciles: 2}
	if err := (&clusterreconciler.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache,
		RemoteConnectionGracePeriod: 2 * time.Minute,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return nil, err
	}
	if err := (&machinereconciler.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache,
		RemoteConditionsGracePeriod: 5 * time.Minute,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return nil, err
	}
	if err := (&msreconciler.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return nil, err
	}
	if err := (&mdreconciler.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "capi: manager stopped: %v\n", err)
		}
	}()
	return done, nil
}

// logToFile sends klog (and so controller-runtime's and Cluster API's logs) to path.
func logToFile(path string) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("log_file", path)
	_ = fs.Set("one_output", "true")
	_ = fs.Set("stderrthreshold", "FATAL")
	ctrl.SetLogger(klog.NewKlogr())
}

func newNamespace(t *testing.T, name string) string {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// bindUserData creates the RoleBinding the README documents by which
// namespace ns consents to class's provider reading its Machines'
// bootstrap data.
func bindUserData(t *testing.T, ctx context.Context, ns, class string) {
	t.Helper()
	if err := c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-userdata", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-provider-userdata"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "banlieue-provider-" + class, Namespace: devenv.Namespace}}}); err != nil {
		t.Fatal(err)
	}
}

// waitProviderReady waits until the provider (its pods, running for the
// package) reports p Ready;
// p then holds the status it wrote, its failure domains among it.
func waitProviderReady(t *testing.T, ctx context.Context, p *banlieuev1alpha1.Provider) {
	t.Helper()
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(p.Status.Conditions, banlieuev1alpha1.ProviderReady) {
			return fmt.Errorf("Provider not Ready: %+v", p.Status.Conditions)
		}
		return nil
	})
}

// failureDomainNames are the names of p's failure domains, in order.
func failureDomainNames(p *banlieuev1alpha1.Provider) []string {
	var names []string
	for _, fd := range p.Status.FailureDomains {
		names = append(names, fd.Name)
	}
	return names
}

// newMachineDeployment is a MachineDeployment of cluster with replicas
// Machines whose bootstrap data is the Secret bootstrap and whose
// infrastructure machines Cluster API clones from the template of kind
// templateKind named name; it rolls out one surge machine at a time.
func newMachineDeployment(ns, name, cluster, templateKind, bootstrap string, replicas int32) *clusterv1.MachineDeployment {
	labels := map[string]string{"md": name, clusterv1.ClusterNameLabel: cluster}
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: cluster, Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName:       cluster,
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: templateKind, Name: name},
				},
			},
		},
	}
}

func machineSpec() infrav1.VSphereMachineSpec {
	return infrav1.VSphereMachineSpec{
		Template:   "ubuntu-22.04-cloudinit",
		Datacenter: "DC0", Cluster: "DC0_C0",
		CommonMachineSpec: infrav1.CommonMachineSpec{CPUs: 2, MemoryMiB: 4096},
		Disks:             []infrav1.VSphereDisk{{Name: "root", SizeGiB: 40, Datastore: "LocalDS_0"}},
		Network:           []infrav1.VSphereNetworkDevice{{Name: "eth0", PortGroup: "VM Network", DHCP4: true}},
	}
}

// createInfraCluster creates ic (a LibvirtCluster, ProxmoxCluster, ...
// selecting its Providers) and a Cluster pointing at it, and waits until
// Cluster API shows the cluster's infrastructure provisioned with the
// failure domains want, which banlieue's controller (its pods, running for
// the package) aggregated into ic's status: the test writes no status.
func createInfraCluster(t *testing.T, ctx context.Context, ic infrav1.Cluster, kind string, want []string) *clusterv1.Cluster {
	t.Helper()
	ic.CommonSpec().ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "192.0.2.30", Port: 6443}
	if err := c.Create(ctx, ic); err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: ic.GetName(), Namespace: ic.GetNamespace()},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupName, Kind: kind, Name: ic.GetName(),
		}},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
			return fmt.Errorf("cluster infrastructure not provisioned yet: %+v", cluster.Status.Initialization)
		}
		var names []string
		for _, fd := range cluster.Status.FailureDomains {
			names = append(names, fd.Name)
		}
		if strings.Join(names, ",") != strings.Join(want, ",") {
			return fmt.Errorf("cluster failure domains %v, want %v", names, want)
		}
		if cluster.Spec.ControlPlaneEndpoint.Host != "192.0.2.30" {
			return fmt.Errorf("control plane endpoint not copied: %+v", cluster.Spec.ControlPlaneEndpoint)
		}
		return nil
	})
	return cluster
}

// TestSchemaRejectsInvalidObjects: kube-apiserver rejects bad infra objects
// with the field path, from the generated CRD schema and CEL rules.
func TestSchemaRejectsInvalidObjects(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "capi-invalid")
	cases := []struct {
		name   string
		mutate func(*infrav1.VSphereMachineSpec)
		fields []string
	}{
		{"zero cpus", func(s *infrav1.VSphereMachineSpec) { s.CPUs = 0 }, []string{"spec.cpus"}},
		{"unknown firmware", func(s *infrav1.VSphereMachineSpec) { s.Firmware = "uefi" }, []string{"spec.firmware"}},
		{"tpm without efi", func(s *infrav1.VSphereMachineSpec) { s.TPMEnabled = true; s.Firmware = infrav1.FirmwareBIOS }, []string{"spec"}},
		{"negative disk", func(s *infrav1.VSphereMachineSpec) { s.Disks[0].SizeGiB = -1 }, []string{"spec.disks[0].sizeGiB"}},
		{"duplicate disks", func(s *infrav1.VSphereMachineSpec) { s.Disks = append(s.Disks, s.Disks[0]) }, []string{"spec.disks[1]"}},
		{"bad provisioning", func(s *infrav1.VSphereMachineSpec) { s.Disks[0].Provisioning = "lazy" }, []string{"spec.disks[0].provisioning"}},
		{"dhcp and static", func(s *infrav1.VSphereMachineSpec) {
			s.Network[0].Static = &infrav1.StaticIP{Address: "192.0.2.5", Prefix: 24}
		}, []string{"spec.network[0]"}},
		{"bad static address", func(s *infrav1.VSphereMachineSpec) {
			s.Network[0].DHCP4 = false
			s.Network[0].Static = &infrav1.StaticIP{Address: "192.0.2.500", Prefix: 24}
		}, []string{"spec.network[0].static.address"}},
		{"missing template", func(s *infrav1.VSphereMachineSpec) { s.Template = "" }, []string{"spec.template"}},
		{"unknown power state", func(s *infrav1.VSphereMachineSpec) { s.PowerState = "Sleeping" }, []string{"spec.powerState"}},
		{"unknown architecture", func(s *infrav1.VSphereMachineSpec) { s.Architecture = "x86_64" }, []string{"spec.architecture"}},
		{"unknown guest OS family", func(s *infrav1.VSphereMachineSpec) { s.GuestOS = &infrav1.GuestOS{Family: "bsd"} }, []string{"spec.guestOS.family"}},
		{"guest OS without a family", func(s *infrav1.VSphereMachineSpec) { s.GuestOS = &infrav1.GuestOS{Distribution: "ubuntu"} }, []string{"spec.guestOS.family"}},
		{"overlong guest OS version", func(s *infrav1.VSphereMachineSpec) {
			s.GuestOS = &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Version: strings.Repeat("9", 257)}
		}, []string{"spec.guestOS.version"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vsm := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bad-%d", i), Namespace: ns}, Spec: machineSpec()}
			tc.mutate(&vsm.Spec)
			err := c.Create(ctx, vsm)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("err = %v, want Invalid", err)
			}
			for _, f := range tc.fields {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error does not name %s: %v", f, err)
				}
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(vsm), &infrav1.VSphereMachine{}); !apierrors.IsNotFound(err) {
				t.Errorf("rejected object stored: %v", err)
			}
		})
	}

	t.Run("providerID is immutable once set", func(t *testing.T) {
		vsm := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: "fixed-id", Namespace: ns}, Spec: machineSpec()}
		vsm.Spec.ProviderID = "vsphere://a"
		if err := c.Create(ctx, vsm); err != nil {
			t.Fatal(err)
		}
		// A patch, not an update: banlieue's controller may have written
		// the machine since (a stale update would fail on its version).
		patch := client.MergeFrom(vsm.DeepCopy())
		vsm.Spec.ProviderID = "vsphere://b"
		err := c.Patch(ctx, vsm, patch)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.providerID") {
			t.Errorf("err = %v, want Invalid on spec.providerID", err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		vsm := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns}, Spec: machineSpec()}
		vsm.Spec.UserDataSecretRef = &infrav1.SecretKeyReference{Name: "bootstrap"}
		if err := c.Create(ctx, vsm); err != nil {
			t.Fatal(err)
		}
		if vsm.Spec.PowerState != infrav1.PowerStatePoweredOn || vsm.Spec.Disks[0].Provisioning != infrav1.DiskProvisioningThin || vsm.Spec.UserDataSecretRef.Key != "value" {
			t.Errorf("defaults not applied: %+v", vsm.Spec)
		}
	})
}

// describeMD summarises a MachineDeployment, its MachineSets and Machines,
// so a timeout says where Cluster API stopped.
func describeMD(ctx context.Context, ns, name string) string {
	var b strings.Builder
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md); err == nil {
		fmt.Fprintf(&b, "MachineDeployment conditions: %v; ", conditionSummary(md.Status.Conditions))
	}
	var sets clusterv1.MachineSetList
	if err := c.List(ctx, &sets, client.InNamespace(ns)); err == nil {
		for _, ms := range sets.Items {
			fmt.Fprintf(&b, "MachineSet %s replicas=%v conditions: %v; ", ms.Name, ptr.Deref(ms.Spec.Replicas, -1), conditionSummary(ms.Status.Conditions))
		}
	}
	var machines clusterv1.MachineList
	if err := c.List(ctx, &machines, client.InNamespace(ns)); err == nil {
		fmt.Fprintf(&b, "%d Machines", len(machines.Items))
	}
	return b.String()
}

func conditionSummary(conds []metav1.Condition) string {
	var out []string
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue {
			out = append(out, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	return strings.Join(out, ", ")
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("not within %s: %v", timeout, last)
	}
}
