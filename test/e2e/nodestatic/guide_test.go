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

package nodestatic

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
	"github.com/firestoned/banlieue/test/grants"
)

const (
	guideUser     = "administrator@vsphere.local"
	guidePassword = "guide-password"
	guideTemplate = "ubuntu-22.04-cloudinit"
)

// TestVSphereGuide runs docs/guides/vsphere.md as a reader does, steps 1
// to 7, on the static install (TestMain followed
// docs/guides/static-install.md): its commands in a shell from a checkout,
// its files written, what they print compared with what it shows; the API
// server, its etcd, the controller and the vSphere provider run as pods of
// the release image, the provider reaching the vCenter simulator from the
// pod network. The guide's site values (the
// vCenter's address, the password, the datastore and port group) are the
// only edits, each of which must be in the guide. Then the VM is checked
// where it runs (powered on in the simulator, with the class's CPUs), and
// the provider pod's own token is asked the least-privilege matrix
// (test/grants): it reads the credentials and CA the guide created by
// name, and nothing else.
func TestVSphereGuide(t *testing.T) {
	ctx := context.Background()
	sim, err := vcsim.Start(ctx, vcsim.Config{Datacenters: 1, Clusters: 1, Template: guideTemplate,
		Username: guideUser, Password: guidePassword, DHCP: true, ServingIPs: []net.IP{net.ParseIP(env.NodeGateway())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	endpoint, err := env.ExposeURL(sim.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "vcenter-ca.pem"), sim.CABundle, 0o644); err != nil {
		t.Fatal(err)
	}
	site := map[string]string{
		"https://vcenter.example.com/sdk": endpoint,
		"REPLACE-ME":                      guidePassword,
		"ds-fast-01":                      "LocalDS_0",
		"vmnet-prod":                      "VM Network",
	}
	t.Cleanup(undoGuide)
	if err := followGuide("vsphere.md", site, work, t.Logf); err != nil {
		t.Fatal(err)
	}

	checkGuideVM(t, ctx, sim)
	// The provider pod's own token holds what the matrix grants the
	// static vSphere provider: the guide's Secret and ConfigMap by name.
	grants.CheckPod(t, ctx, env, devenv.Namespace, "provider-vsphere", devenv.ProviderUser)
}

// undoGuide removes what the guide made, the VM first while the
// controller and provider pods are there to release it; the provider
// stays, as the static install had it before the guide's step 1.
func undoGuide() {
	for _, args := range [][]string{
		{"-n", devenv.Namespace, "delete", "virtualmachine", "db-prod-01", "--wait=true", "--timeout=120s"},
		{"-n", devenv.Namespace, "delete", "provider", "prod-vsphere", "--wait=true", "--timeout=60s"},
		{"delete", "vmclass", "db-prod-large"},
		{"delete", "vmimage", "ubuntu-22.04-cloudinit"},
		{"-n", devenv.Namespace, "delete", "secret", "vsphere-creds"},
		{"-n", devenv.Namespace, "delete", "configmap", "vcenter-ca"},
	} {
		_, _ = env.Kubectl("", append(args, "--ignore-not-found")...)
	}
}

// checkGuideVM: the guide's VM runs in the simulator, powered on with the
// class's 8 CPUs.
func checkGuideVM(t *testing.T, ctx context.Context, sim *vcsim.Simulator) {
	t.Helper()
	m, err := vcsim.ReadVM(ctx, sim.Endpoint, guideUser, guidePassword, "DC0", providers.BackendName(devenv.Namespace, "db-prod-01"))
	if err != nil || m == nil {
		t.Fatalf("the guide's VM in the simulator: %v (found %v)", err, m != nil)
	}
	if m.Runtime.PowerState != "poweredOn" || m.Config.Hardware.NumCPU != 8 {
		t.Errorf("the guide's VM is %s with %d CPUs, want poweredOn with 8", m.Runtime.PowerState, m.Config.Hardware.NumCPU)
	}
}
