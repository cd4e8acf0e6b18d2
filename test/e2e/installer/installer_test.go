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

// Package installer boots the installer ISO (hack/build-installer-iso.sh)
// on real QEMU (software emulation, no libvirt): it installs the test
// guest onto a blank disk with the NoCloud seed's cloud-config in it, and
// the disk then boots by itself and shows that cloud-config.
package installer

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
)

var (
	isoOnce sync.Once
	isoPath string
	isoErr  error
)

// installerISO builds bin/guest/installer.iso with the script (a no-op when
// it is up to date) and returns its path; the test fails, never skips,
// without it or without QEMU.
func installerISO(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (make libvirt installs QEMU and builds the installer ISO): %v", tool, err)
		}
	}
	isoOnce.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", "..", ".."))
		if err != nil {
			isoErr = err
			return
		}
		isoPath = filepath.Join(root, "bin", "guest", "installer.iso")
		out, err := exec.Command(filepath.Join(root, "hack", "build-installer-iso.sh"), isoPath).CombinedOutput()
		if err != nil {
			isoErr = fmt.Errorf("hack/build-installer-iso.sh %s: %v\n%s", isoPath, err, out)
		}
	})
	if isoErr != nil {
		t.Fatalf("no installer ISO (make libvirt installs the tools and builds it): %v", isoErr)
	}
	if _, err := os.Stat(isoPath); err != nil {
		t.Fatalf("no installer ISO (make libvirt, or hack/build-installer-iso.sh %s): %v", isoPath, err)
	}
	return isoPath
}

// vm is one QEMU process whose serial console goes to a file.
type vm struct {
	cmd   *exec.Cmd
	log   string
	start time.Time
	done  chan struct{}
	err   error
}

func boot(t *testing.T, name string, args ...string) *vm {
	t.Helper()
	v := &vm{log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	args = append([]string{"-machine", "accel=tcg", "-m", "256", "-nographic", "-monitor", "none",
		"-nic", "none", "-serial", "file:" + v.log}, args...)
	v.cmd = exec.Command("qemu-system-x86_64", args...)
	var stderr bytes.Buffer
	v.cmd.Stdout, v.cmd.Stderr = &stderr, &stderr
	v.start = time.Now()
	if err := v.cmd.Start(); err != nil {
		t.Fatalf("qemu-system-x86_64: %v", err)
	}
	go func() {
		v.err = v.cmd.Wait()
		if v.err != nil {
			v.err = fmt.Errorf("%v: %s", v.err, stderr.String())
		}
		close(v.done)
	}()
	t.Cleanup(v.kill)
	return v
}

func (v *vm) kill() {
	select {
	case <-v.done:
	default:
		_ = v.cmd.Process.Kill()
		<-v.done
	}
}

// lines is the serial console so far, one entry a line, without the
// carriage returns and the escape sequences a line may start with.
func (v *vm) lines() []string {
	b, _ := os.ReadFile(v.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r")
		if i := strings.Index(l, "BANLIEUE-"); i > 0 {
			l = l[i:]
		}
		out = append(out, l)
	}
	return out
}

func (v *vm) has(line string) bool {
	for _, l := range v.lines() {
		if l == line {
			return true
		}
	}
	return false
}

func (v *vm) hasPrefix(prefix string) bool {
	for _, l := range v.lines() {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// waitExit waits for QEMU to exit by itself (the guest powered off).
func (v *vm) waitExit(t *testing.T, timeout time.Duration) time.Duration {
	t.Helper()
	select {
	case <-v.done:
		if v.err != nil {
			t.Fatalf("QEMU failed: %v\nserial console:\n%s", v.err, strings.Join(v.lines(), "\n"))
		}
		return time.Since(v.start)
	case <-time.After(timeout):
		t.Fatalf("QEMU still running after %s; serial console:\n%s", timeout, strings.Join(v.lines(), "\n"))
	}
	return 0
}

// waitFor waits until the serial console shows every line.
func (v *vm) waitFor(t *testing.T, timeout time.Duration, lines ...string) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing := ""
		for _, l := range lines {
			if !v.has(l) {
				missing = l
				break
			}
		}
		if missing == "" {
			return time.Since(v.start)
		}
		select {
		case <-v.done:
			t.Fatalf("QEMU exited (%v) before %q; serial console:\n%s", v.err, missing, strings.Join(v.lines(), "\n"))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q after %s; serial console:\n%s", missing, timeout, strings.Join(v.lines(), "\n"))
		}
	}
}

func disk(file, format string, bootindex int) []string {
	id := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	dev := "virtio-blk-pci,drive=" + id
	if bootindex > 0 {
		dev += fmt.Sprintf(",bootindex=%d", bootindex)
	}
	return []string{"-drive", "file=" + file + ",format=" + format + ",if=none,id=" + id, "-device", dev}
}

func cdrom(file, id string, bootindex int) []string {
	dev := "ide-cd,drive=" + id
	if bootindex > 0 {
		dev += fmt.Sprintf(",bootindex=%d", bootindex)
	}
	return []string{"-drive", "file=" + file + ",format=raw,if=none,media=cdrom,readonly=on,id=" + id, "-device", dev}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// uefi is QEMU's UEFI firmware (OVMF, from the ovmf package make libvirt
// installs) with a fresh copy of its variable store in dir, kept across
// the VM's boots as a real VM's NVRAM is.
func uefi(t *testing.T, dir string) []string {
	t.Helper()
	const code, vars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
	b, err := os.ReadFile(vars)
	if err != nil {
		t.Fatalf("no OVMF (make libvirt installs the ovmf package): %v", err)
	}
	if _, err := os.Stat(code); err != nil {
		t.Fatalf("no OVMF (make libvirt installs the ovmf package): %v", err)
	}
	nvram := filepath.Join(dir, "OVMF_VARS.fd")
	if err := os.WriteFile(nvram, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"-drive", "if=pflash,format=raw,readonly=on,file=" + code, "-drive", "if=pflash,format=raw,file=" + nvram}
}

// TestInstall, with BIOS (SeaBIOS) and UEFI (OVMF) firmware: a VM with a
// blank disk (first in boot order), the ISO and a NoCloud seed installs
// itself and powers off; its disk then boots alone with the seed's
// write_files in it and runs its runcmd once; booted again with the ISO
// still attached (deferred mode), the disk boots first.
func TestInstall(t *testing.T) {
	t.Run("BIOS", func(t *testing.T) { testInstall(t, false) })
	t.Run("UEFI", func(t *testing.T) { testInstall(t, true) })
}

func testInstall(t *testing.T, withUEFI bool) {
	iso := installerISO(t)
	dir := t.TempDir()
	var firmware []string
	if withUEFI {
		firmware = uefi(t, dir)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)

	// The user data as banlieue joins an image's cloudConfigs: a MIME
	// multipart of cloud-config documents, the first one as sigs.k8s.io/yaml
	// writes it (list items at the key's indentation, keys sorted).
	files, err := yaml.Marshal(map[string]any{"write_files": []map[string]string{
		{"path": "/etc/banlieue/marker", "content": token},
		{"path": "/etc/banlieue/notes", "content": "first line\nsecond line\n", "permissions": "0600"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	userData, err := cloudinit.Multipart(
		append([]byte("#cloud-config\n"), files...),
		[]byte("#cloud-config\nruncmd:\n  - echo runcmd-"+token+"\n  - [ echo, second, command ]\n"),
	)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := cloudinit.ISO("cidata", map[string][]byte{
		"meta-data": []byte("instance-id: installer-test\nlocal-hostname: installed\n"),
		"user-data": userData,
	})
	if err != nil {
		t.Fatal(err)
	}
	seedPath := filepath.Join(dir, "seed.iso")
	if err := os.WriteFile(seedPath, seed, 0o644); err != nil {
		t.Fatal(err)
	}
	diskPath := filepath.Join(dir, "disk.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", diskPath, "64M")

	// The install: disk first, then the ISO (a blank disk is not bootable).
	args := append(append(firmware, disk(diskPath, "qcow2", 1)...), cdrom(iso, "installer", 2)...)
	install := boot(t, "install", append(args, cdrom(seedPath, "seed", 0)...)...)
	took := install.waitExit(t, 4*time.Minute)
	for _, l := range []string{"BANLIEUE-INSTALLER START", "BANLIEUE-INSTALLER WROTE /etc/banlieue/marker",
		"BANLIEUE-INSTALLER WROTE /etc/banlieue/notes", "BANLIEUE-INSTALLER RUNCMD 2 commands", "BANLIEUE-INSTALLER DONE"} {
		if !install.has(l) {
			t.Fatalf("no %q in the install's serial console:\n%s", l, strings.Join(install.lines(), "\n"))
		}
	}
	t.Logf("install under TCG: %s from QEMU's start to its exit", took.Round(100*time.Millisecond))

	// The installed disk alone: the guest, with the cloud-config in it.
	first := boot(t, "first-boot", append(firmware, disk(diskPath, "qcow2", 1)...)...)
	took = first.waitFor(t, 3*time.Minute, "BANLIEUE-INSTALLED "+token, "BANLIEUE-INSTALLED first line",
		"BANLIEUE-INSTALLED second line", "BANLIEUE-RUNCMD runcmd-"+token, "BANLIEUE-RUNCMD second command",
		"BANLIEUE-DISK vda 64", "BANLIEUE-READY")
	first.kill()
	t.Logf("installed disk's first boot under TCG: BANLIEUE-READY after %s", took.Round(100*time.Millisecond))

	// Deferred mode: the ISO and the seed still attached, disk first: the
	// disk boots, the installer does not run again, nor does runcmd.
	again := boot(t, "second-boot", append(args, cdrom(seedPath, "seed", 0)...)...)
	again.waitFor(t, 3*time.Minute, "BANLIEUE-INSTALLED "+token, "BANLIEUE-READY")
	again.kill()
	if again.hasPrefix("BANLIEUE-INSTALLER") || again.hasPrefix("BANLIEUE-RUNCMD") {
		t.Fatalf("the second boot ran the installer or runcmd again:\n%s", strings.Join(again.lines(), "\n"))
	}
}

// TestNoBlankDisk: without a blank disk (one that is not, and no seed) the
// installer refuses, leaves the disk alone and powers off.
func TestNoBlankDisk(t *testing.T) {
	iso := installerISO(t)
	diskPath := filepath.Join(t.TempDir(), "used.raw")
	content := []byte("not a blank disk, not bootable either")
	if err := os.WriteFile(diskPath, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(diskPath, 64<<20); err != nil {
		t.Fatal(err)
	}
	v := boot(t, "refuse", append(disk(diskPath, "raw", 1), cdrom(iso, "installer", 2)...)...)
	took := v.waitExit(t, 4*time.Minute)
	if !v.hasPrefix("BANLIEUE-INSTALLER FAILED") || v.has("BANLIEUE-INSTALLER DONE") {
		t.Fatalf("no BANLIEUE-INSTALLER FAILED; serial console:\n%s", strings.Join(v.lines(), "\n"))
	}
	got, err := os.ReadFile(diskPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, content) || len(got) != 64<<20 {
		t.Fatal("the installer changed a disk that was not blank")
	}
	t.Logf("refusal under TCG: %s from QEMU's start to its exit", took.Round(100*time.Millisecond))
}
