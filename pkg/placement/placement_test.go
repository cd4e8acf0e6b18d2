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
package placement

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/resolve"
)

const ns = "banlieue-system"

func seedClass() *v1alpha1.VMClass {
	return &v1alpha1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-large"},
		Spec: v1alpha1.VMClassSpec{
			Hardware: v1alpha1.VMClassHardware{CPUs: 8, MemoryMiB: 32768, Disks: []v1alpha1.DiskSpec{
				{Name: "root", SizeGiB: 80, StorageClass: "gold"}, {Name: "data", SizeGiB: 500, StorageClass: "gold"},
			}},
			Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
			Firmware: v1alpha1.FirmwareEFISecure,
			Features: []string{"hotAddCPU", "hotAddMemory", "efiSecureBoot"},
		},
	}
}

func seedImage(ready ...string) *v1alpha1.VMImage {
	img := &v1alpha1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit"},
		Spec:       v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"}}},
	}
	for _, p := range ready {
		img.Status.PerProvider = append(img.Status.PerProvider, v1alpha1.ImageProviderStatus{Provider: ns + "/" + p, Ready: true})
	}
	return img
}

func provider(name string, fds ...string) v1alpha1.Provider {
	p := v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"dc": "dc1", "env": "prod"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "ds-fast-01"}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "vmnet-prod"}}},
				Features:       []string{"hotAddCPU", "hotAddMemory", "efiSecureBoot"},
			},
		},
		Status: v1alpha1.ProviderStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "InventoryWalked"}}},
	}
	for _, fd := range fds {
		p.Status.FailureDomains = append(p.Status.FailureDomains, v1alpha1.FailureDomain{Name: fd, Datacenter: "dc", Cluster: fd, Labels: map[string]string{"zone": fd[len(fd)-1:]}})
	}
	return p
}

func seedVM() *v1alpha1.VirtualMachine {
	return &v1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-01", Namespace: ns},
		Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "db-prod-large"}, ImageRef: v1alpha1.LocalObjectReference{Name: "ubuntu-22.04-cloudinit"},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": "dc1", "env": "prod"}}},
		},
	}
}

func input(t *testing.T, vm *v1alpha1.VirtualMachine, class *v1alpha1.VMClass, img *v1alpha1.VMImage, providers ...v1alpha1.Provider) Input {
	t.Helper()
	r, err := resolve.Resolve(vm, class, img)
	if err != nil {
		t.Fatal(err)
	}
	return Input{VM: vm, Resolved: r, Image: img, Providers: providers}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name       string
		vm         func(*v1alpha1.VirtualMachine)
		class      func(*v1alpha1.VMClass)
		image      *v1alpha1.VMImage
		providers  []v1alpha1.Provider
		wantReason string
		wantMsg    string
		wantFD     string
	}{
		{
			name: "seed guide schedules", image: seedImage("prod-vsphere"),
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a", "fd-b")},
			wantReason: ReasonScheduled, wantFD: "fd-a",
		},
		{
			name: "label mismatch", image: seedImage("prod-vsphere"),
			vm: func(vm *v1alpha1.VirtualMachine) {
				vm.Spec.Placement.ProviderSelector.MatchLabels["env"] = "staging"
			},
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonNoProviderMatched, wantMsg: "do not match providerSelector",
		},
		{
			name: "missing storage class", image: seedImage("prod-vsphere"),
			class:      func(c *v1alpha1.VMClass) { c.Spec.Hardware.Disks[1].StorageClass = "platinum" },
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonNoProviderMatched, wantMsg: `storage class "platinum" (disk data)`,
		},
		{
			name: "missing network class", image: seedImage("prod-vsphere"),
			class:      func(c *v1alpha1.VMClass) { c.Spec.Network.Interfaces[0].NetworkClass = "dmz" },
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonNoProviderMatched, wantMsg: `network class "dmz" (interface eth0)`,
		},
		{
			name: "missing feature", image: seedImage("prod-vsphere"),
			class:      func(c *v1alpha1.VMClass) { c.Spec.Features = append(c.Spec.Features, "gpuPassthrough") },
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonNoProviderMatched, wantMsg: `feature "gpuPassthrough"`,
		},
		{
			// Secure boot is the Provider's to offer: efi-secure firmware
			// needs efiSecureBoot even when the class does not list it.
			name: "efi-secure without efiSecureBoot", image: seedImage("prod-vsphere"),
			class: func(c *v1alpha1.VMClass) { c.Spec.Features = []string{"hotAddCPU", "hotAddMemory"} },
			providers: []v1alpha1.Provider{func() v1alpha1.Provider {
				p := provider("prod-vsphere", "fd-a")
				p.Spec.Capabilities.Features = []string{"hotAddCPU", "hotAddMemory"}
				return p
			}()},
			wantReason: ReasonNoProviderMatched, wantMsg: `feature "efiSecureBoot" (firmware efi-secure)`,
		},
		{
			name: "efi without efiSecureBoot", image: seedImage("prod-vsphere"),
			class: func(c *v1alpha1.VMClass) {
				c.Spec.Firmware, c.Spec.Features = v1alpha1.FirmwareEFI, []string{"hotAddCPU", "hotAddMemory"}
			},
			providers: []v1alpha1.Provider{func() v1alpha1.Provider {
				p := provider("prod-vsphere", "fd-a")
				p.Spec.Capabilities.Features = []string{"hotAddCPU", "hotAddMemory"}
				return p
			}()},
			wantReason: ReasonScheduled, wantFD: "fd-a",
		},
		{
			name: "tpm unsupported", image: seedImage("prod-vsphere"),
			class:      func(c *v1alpha1.VMClass) { c.Spec.TPMEnabled, c.Spec.Firmware = true, v1alpha1.FirmwareEFI },
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonTpmUnsupported, wantMsg: `"vtpm"`,
		},
		{
			name: "tpm supported", image: seedImage("prod-vsphere"),
			class: func(c *v1alpha1.VMClass) { c.Spec.TPMEnabled, c.Spec.Firmware = true, v1alpha1.FirmwareEFI },
			providers: func() []v1alpha1.Provider {
				p := provider("prod-vsphere", "fd-a")
				p.Spec.Capabilities.Features = append(p.Spec.Capabilities.Features, "vtpm")
				return []v1alpha1.Provider{p}
			}(),
			wantReason: ReasonScheduled, wantFD: "fd-a",
		},
		{
			name: "image not checked yet", image: seedImage(),
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonImageNotReady, wantMsg: "has not checked it yet",
		},
		{
			name: "image not ready", image: func() *v1alpha1.VMImage {
				img := seedImage()
				img.Status.PerProvider = []v1alpha1.ImageProviderStatus{{Provider: ns + "/prod-vsphere", Reason: "TemplateNotFound", Message: "not in DC0"}}
				return img
			}(),
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonImageNotReady, wantMsg: "TemplateNotFound not in DC0",
		},
		{
			name: "image without a source for the class", image: func() *v1alpha1.VMImage {
				img := seedImage("prod-vsphere")
				img.Spec.Sources[0].ProviderClass = "proxmox"
				return img
			}(),
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonImageNotReady, wantMsg: `no source for provider class "vsphere"`,
		},
		{
			name: "provider not ready", image: seedImage("prod-vsphere"),
			providers: func() []v1alpha1.Provider {
				p := provider("prod-vsphere", "fd-a")
				p.Status.Conditions[0].Status, p.Status.Conditions[0].Reason = metav1.ConditionFalse, "ConnectFailed"
				return []v1alpha1.Provider{p}
			}(),
			wantReason: ReasonNoProviderMatched, wantMsg: "not Ready (ConnectFailed",
		},
		{
			name: "failure domain selector picks by name", image: seedImage("prod-vsphere"),
			vm: func(vm *v1alpha1.VirtualMachine) {
				vm.Spec.Placement.FailureDomainSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"name": "fd-b"}}
			},
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a", "fd-b")},
			wantReason: ReasonScheduled, wantFD: "fd-b",
		},
		{
			name: "no failure domain matches", image: seedImage("prod-vsphere"),
			vm: func(vm *v1alpha1.VirtualMachine) {
				vm.Spec.Placement.FailureDomainSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "z"}}
			},
			providers:  []v1alpha1.Provider{provider("prod-vsphere", "fd-a")},
			wantReason: ReasonNoProviderMatched, wantMsg: "none of its 1 failure domains",
		},
		{
			name: "nearest miss wins: image beats labels", image: seedImage(),
			providers: func() []v1alpha1.Provider {
				other := provider("other", "fd-x")
				other.Labels = map[string]string{"dc": "dc9"}
				return []v1alpha1.Provider{other, provider("prod-vsphere", "fd-a")}
			}(),
			wantReason: ReasonImageNotReady, wantMsg: "other: labels",
		},
		{
			name: "no providers at all", image: seedImage(),
			wantReason: ReasonNoProviderMatched, wantMsg: "no Providers",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm, class := seedVM(), seedClass()
			if tc.vm != nil {
				tc.vm(vm)
			}
			if tc.class != nil {
				tc.class(class)
			}
			d := Decide(input(t, vm, class, tc.image, tc.providers...))
			if d.Reason != tc.wantReason {
				t.Errorf("reason = %s (%s), want %s", d.Reason, d.Message, tc.wantReason)
			}
			if !strings.Contains(d.Message, tc.wantMsg) {
				t.Errorf("message %q lacks %q", d.Message, tc.wantMsg)
			}
			if d.Fits != (tc.wantReason == ReasonScheduled) {
				t.Errorf("fits = %v", d.Fits)
			}
			if tc.wantFD != "" {
				s := d.Scheduled
				if s.Provider != "prod-vsphere" || s.FailureDomain != tc.wantFD {
					t.Errorf("scheduled %s/%s, want prod-vsphere/%s", s.Provider, s.FailureDomain, tc.wantFD)
				}
				if len(s.Storage) != 2 || s.Storage[1].Target != "ds-fast-01" || s.Network[0].Target != "vmnet-prod" {
					t.Errorf("resolutions: %+v %+v", s.Storage, s.Network)
				}
			}
		})
	}
}

// TestSpread: 100 VMs over 2 Providers x 3 failure domains, each placed
// with the loads so far, end up evenly spread; the same inputs give the
// same choice.
func TestSpread(t *testing.T) {
	providers := []v1alpha1.Provider{provider("vc-a", "fd-1", "fd-2", "fd-3"), provider("vc-b", "fd-1", "fd-2", "fd-3")}
	img := seedImage("vc-a", "vc-b")
	load := map[string]int{}
	for i := 0; i < 100; i++ {
		vm := seedVM()
		vm.Name = fmt.Sprintf("vm-%d", i)
		in := input(t, vm, seedClass(), img, providers...)
		in.Load = load
		d := Decide(in)
		if !d.Fits {
			t.Fatalf("vm %d: %s", i, d.Message)
		}
		if again := Decide(in); again.Scheduled.Provider != d.Scheduled.Provider || again.Scheduled.FailureDomain != d.Scheduled.FailureDomain {
			t.Fatalf("not deterministic")
		}
		load[Key(QualifiedProvider(vm.Namespace, d.Scheduled.Provider), d.Scheduled.FailureDomain)]++
	}
	lo, hi := 100, 0
	for _, n := range load {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(load) != 6 || hi-lo > 1 {
		t.Errorf("spread %v (max-min %d)", load, hi-lo)
	}
}

func TestAntiAffinity(t *testing.T) {
	app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	term := func(topology v1alpha1.AntiAffinityTopology, mode v1alpha1.AntiAffinityMode) v1alpha1.AntiAffinityTerm {
		return v1alpha1.AntiAffinityTerm{TopologyKey: topology, LabelSelector: app, Mode: mode}
	}
	db := map[string]string{"app": "db"}
	peer := func(name, provider, fd string, l map[string]string) Peer {
		return Peer{Name: name, Labels: l, Provider: ns + "/" + provider, FailureDomain: fd}
	}
	cases := []struct {
		name       string
		terms      []v1alpha1.AntiAffinityTerm
		peers      []Peer
		load       map[string]int
		wantReason string
		wantFD     string // "provider/fd" chosen
		wantMsg    string
	}{
		{"no peers", []v1alpha1.AntiAffinityTerm{term("failureDomain", "required")}, nil, nil, ReasonScheduled, "p1/fd-a", ""},
		{"required failure domain skips the taken one", []v1alpha1.AntiAffinityTerm{term("failureDomain", "required")},
			[]Peer{peer("db-0", "p1", "fd-a", db)}, nil, ReasonScheduled, "p1/fd-b", ""},
		{"peers of another app do not count", []v1alpha1.AntiAffinityTerm{term("failureDomain", "required")},
			[]Peer{peer("web-0", "p1", "fd-a", map[string]string{"app": "web"})}, nil, ReasonScheduled, "p1/fd-a", ""},
		{"required provider skips the whole Provider", []v1alpha1.AntiAffinityTerm{term("provider", "required")},
			[]Peer{peer("db-0", "p1", "fd-b", db)}, nil, ReasonScheduled, "p2/fd-c", ""},
		{"every domain taken", []v1alpha1.AntiAffinityTerm{term("failureDomain", "required")},
			[]Peer{peer("db-0", "p1", "fd-a", db), peer("db-1", "p1", "fd-b", db), peer("db-2", "p2", "fd-c", db), peer("db-3", "p2", "fd-d", db)},
			nil, ReasonAntiAffinityUnsatisfied, "", "required anti-affinity (failureDomain app=db): VM db-0 runs in this failure domain"},
		{"preferred beats load", []v1alpha1.AntiAffinityTerm{term("failureDomain", "preferred")},
			[]Peer{peer("db-0", "p1", "fd-a", db), peer("db-1", "p1", "fd-b", db), peer("db-2", "p2", "fd-c", db)},
			map[string]int{Key(ns+"/p2", "fd-d"): 5}, ReasonScheduled, "p2/fd-d", ""},
		{"preferred, all taken: the least taken", []v1alpha1.AntiAffinityTerm{term("failureDomain", "preferred")},
			[]Peer{peer("db-0", "p1", "fd-a", db), peer("db-1", "p1", "fd-a", db), peer("db-2", "p1", "fd-b", db), peer("db-3", "p2", "fd-c", db), peer("db-4", "p2", "fd-d", db), peer("db-5", "p2", "fd-d", db)},
			nil, ReasonScheduled, "p1/fd-b", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := seedVM()
			vm.Spec.Placement.AntiAffinity = tc.terms
			in := input(t, vm, seedClass(), seedImage("p1", "p2"), provider("p1", "fd-a", "fd-b"), provider("p2", "fd-c", "fd-d"))
			in.Peers, in.Load = tc.peers, tc.load
			d := Decide(in)
			if d.Reason != tc.wantReason {
				t.Fatalf("reason %s (%s), want %s", d.Reason, d.Message, tc.wantReason)
			}
			if tc.wantFD != "" && d.Scheduled.Provider+"/"+d.Scheduled.FailureDomain != tc.wantFD {
				t.Errorf("placed on %s/%s, want %s", d.Scheduled.Provider, d.Scheduled.FailureDomain, tc.wantFD)
			}
			if !strings.Contains(d.Message, tc.wantMsg) {
				t.Errorf("message %q lacks %q", d.Message, tc.wantMsg)
			}
		})
	}
}

func TestDrift(t *testing.T) {
	p := provider("prod-vsphere", "fd-a", "fd-b")
	placed := func(mutate func(*v1alpha1.VirtualMachine)) *v1alpha1.VirtualMachine {
		vm := seedVM()
		vm.Status.Scheduled = &v1alpha1.ScheduledPlacement{Provider: "prod-vsphere", FailureDomain: "fd-b"}
		if mutate != nil {
			mutate(vm)
		}
		return vm
	}
	notReady := p.DeepCopy()
	notReady.Status.Conditions[0].Status = metav1.ConditionFalse
	notReady.Status.FailureDomains = nil
	apart := func(topology v1alpha1.AntiAffinityTopology, mode v1alpha1.AntiAffinityMode) func(*v1alpha1.VirtualMachine) {
		return func(vm *v1alpha1.VirtualMachine) {
			vm.Spec.Placement.AntiAffinity = []v1alpha1.AntiAffinityTerm{{TopologyKey: topology, Mode: mode,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
		}
	}
	db := map[string]string{"app": "db"}
	sameDomain := []Peer{{Name: "db-prod-02", Labels: db, Provider: ns + "/prod-vsphere", FailureDomain: "fd-b"}}
	otherDomain := []Peer{{Name: "db-prod-02", Labels: db, Provider: ns + "/prod-vsphere", FailureDomain: "fd-a"}}
	elsewhere := []Peer{{Name: "db-prod-02", Labels: db, Provider: ns + "/lab-vsphere", FailureDomain: "fd-b"}}
	unselected := []Peer{{Name: "web-01", Labels: map[string]string{"app": "web"}, Provider: ns + "/prod-vsphere", FailureDomain: "fd-b"}}
	for _, tc := range []struct {
		name     string
		vm       *v1alpha1.VirtualMachine
		provider *v1alpha1.Provider
		peers    []Peer
		want     string
	}{
		{"holds", placed(nil), &p, nil, ""},
		{"required failure-domain anti-affinity added, a peer there", placed(apart(v1alpha1.AntiAffinityFailureDomain, v1alpha1.AntiAffinityRequired)), &p, sameDomain,
			"required anti-affinity (failureDomain app=db): VM db-prod-02 runs in failure domain fd-b"},
		{"required anti-affinity, mode left empty", placed(apart(v1alpha1.AntiAffinityFailureDomain, "")), &p, sameDomain, "required anti-affinity"},
		{"failure-domain anti-affinity, the peer in another domain", placed(apart(v1alpha1.AntiAffinityFailureDomain, v1alpha1.AntiAffinityRequired)), &p, otherDomain, ""},
		{"provider anti-affinity, the peer in another domain of the Provider", placed(apart(v1alpha1.AntiAffinityProvider, v1alpha1.AntiAffinityRequired)), &p, otherDomain,
			"VM db-prod-02 runs on Provider " + ns + "/prod-vsphere"},
		{"provider anti-affinity, the peer on another Provider", placed(apart(v1alpha1.AntiAffinityProvider, v1alpha1.AntiAffinityRequired)), &p, elsewhere, ""},
		{"anti-affinity selecting no peer there", placed(apart(v1alpha1.AntiAffinityProvider, v1alpha1.AntiAffinityRequired)), &p, unselected, ""},
		{"preferred anti-affinity is no reason to move", placed(apart(v1alpha1.AntiAffinityFailureDomain, v1alpha1.AntiAffinityPreferred)), &p, sameDomain, ""},
		{"anti-affinity removed", placed(nil), &p, sameDomain, ""},
		{"not placed", seedVM(), nil, nil, ""},
		{"Provider gone", placed(nil), nil, nil, "no longer exists"},
		{"selector edited", placed(func(vm *v1alpha1.VirtualMachine) { vm.Spec.Placement.ProviderSelector.MatchLabels["env"] = "lab" }), &p, nil, "no longer matches providerSelector"},
		{"failure domain gone", placed(func(vm *v1alpha1.VirtualMachine) { vm.Status.Scheduled.FailureDomain = "fd-z" }), &p, nil, "no longer publishes failure domain fd-z"},
		{"failure domain selector edited", placed(func(vm *v1alpha1.VirtualMachine) {
			vm.Spec.Placement.FailureDomainSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
		}), &p, nil, "no longer matches failureDomainSelector"},
		{"Provider not Ready: an outage, not a drift", placed(nil), notReady, nil, ""},
	} {
		got := Drift(tc.vm, tc.provider, tc.peers)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	rest := Without([]v1alpha1.Provider{p}, ns+"/prod-vsphere", "fd-b")
	if len(rest[0].Status.FailureDomains) != 1 || rest[0].Status.FailureDomains[0].Name != "fd-a" || len(p.Status.FailureDomains) != 2 {
		t.Errorf("Without: %+v (original %d domains)", rest[0].Status.FailureDomains, len(p.Status.FailureDomains))
	}
}

// The shared-Provider namespace is a parameter: an install elsewhere shares
// its own namespace's Providers, and banlieue-system's are then nobody's
// but banlieue-system's own VMs'.
func TestCandidateNamespaces(t *testing.T) {
	for _, tc := range []struct {
		vm, shared string
		want       []string
	}{
		{"team-a", "banlieue-system", []string{"team-a", "banlieue-system"}},
		{"team-a", "ops", []string{"team-a", "ops"}},
		{"ops", "ops", []string{"ops"}},
		{"banlieue-system", "ops", []string{"banlieue-system", "ops"}},
		{"team-a", "", []string{"team-a"}},
	} {
		got := CandidateNamespaces(tc.vm, tc.shared)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("CandidateNamespaces(%q, %q) = %v, want %v", tc.vm, tc.shared, got, tc.want)
		}
		// MayServe agrees with the list, for a Provider in or out of it.
		for _, providerNS := range []string{"team-a", "ops", "banlieue-system", "team-b"} {
			listed := strings.Contains(" "+strings.Join(got, " ")+" ", " "+providerNS+" ")
			if MayServe(providerNS, tc.vm, tc.shared) != listed {
				t.Errorf("MayServe(%q, %q, %q) = %v, want %v", providerNS, tc.vm, tc.shared, !listed, listed)
			}
		}
	}
}

// TestFirmwareFeature: efi-secure is the only firmware a Provider must
// advertise a feature for.
func TestFirmwareFeature(t *testing.T) {
	for firmware, want := range map[string]string{
		"efi-secure": EFISecureBootFeature, "efi": "", "bios": "", "": "",
	} {
		if got := FirmwareFeature(firmware); got != want {
			t.Errorf("FirmwareFeature(%q) = %q, want %q", firmware, got, want)
		}
	}
}

// TestDecideAsksTheBackend: a candidate whose backend cannot build the VM
// is passed over before placing, with the backend's field named; when no
// candidate's can, the VM is not placed, with reason BackendUnsupported.
func TestDecideAsksTheBackend(t *testing.T) {
	refuse := map[string]bool{"prod-vsphere": true}
	in := input(t, seedVM(), seedClass(), seedImage("prod-vsphere", "second"), provider("prod-vsphere", "fd-a"), provider("second", "fd-b"))
	in.Backend = func(p *v1alpha1.Provider) *field.Error {
		if refuse[p.Name] {
			return field.NotSupported(field.NewPath("spec", "disks").Index(0).Child("provisioning"), "thick", []string{"thin"})
		}
		return nil
	}
	if d := Decide(in); !d.Fits || d.Scheduled.Provider != "second" {
		t.Errorf("with one backend refusing: %s %s, scheduled %+v; want second", d.Reason, d.Message, d.Scheduled)
	}
	refuse["second"] = true
	d := Decide(in)
	if d.Fits || d.Reason != ReasonBackendUnsupported || !strings.Contains(d.Message, "spec.disks[0].provisioning") {
		t.Errorf("with every backend refusing: fits %v, %s %q; want BackendUnsupported naming spec.disks[0].provisioning", d.Fits, d.Reason, d.Message)
	}
}
