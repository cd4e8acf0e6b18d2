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
package vsphere

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
	"github.com/firestoned/banlieue/pkg/providers/ignition"
)

// The keys cloud-init's VMware datasource reads.
const (
	guestInfoUserData         = "guestinfo.userdata"
	guestInfoUserDataEncoding = "guestinfo.userdata.encoding"
	guestInfoMetaData         = "guestinfo.metadata"
	guestInfoMetaDataEncoding = "guestinfo.metadata.encoding"
)

// The keys Ignition and Afterburn read on VMware.
const (
	guestInfoIgnition         = "guestinfo.ignition.config.data"
	guestInfoIgnitionEncoding = "guestinfo.ignition.config.data.encoding"
	guestInfoNetworkKargs     = "guestinfo.afterburn.initrd.network-kargs"
)

// userDataRemoved marks a VM whose bootstrap data the provider removed
// once its guest had read it: from then on the data is never written to
// that VM again, by this process or a restarted one (the mark is in the
// VM, not in memory). It is not a guestinfo key: the guest can neither
// read nor set it.
const userDataRemoved = "banlieue.userdata.removed"

// bootstrapKeys carry the user data itself: Cluster API's bootstrap data
// holds join tokens and certificates, and anyone who may read the VM in
// vCenter reads its extraConfig. The metadata (instance ID, host name,
// network) stays: cloud-init finds its datasource by it at every later
// boot and sees the same instance, where without it a reboot would look
// like a new instance and run the first-boot modules again, with no user
// data. Afterburn's network arguments are no secret either.
var bootstrapKeys = []string{guestInfoUserData, guestInfoUserDataEncoding, guestInfoIgnition, guestInfoIgnitionEncoding}

// bootstrapConsumed tells that the guest has read its bootstrap data: the
// VM is on, VMware Tools run in it and report an address. cloud-init's
// VMware datasource reads guestinfo in its local stage, before the
// network is up, and Ignition in the initramfs, before Tools start: an
// address reported by Tools comes after both.
func bootstrapConsumed(m mo.VirtualMachine) bool {
	return m.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn && m.Guest != nil &&
		m.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) && m.Guest.IpAddress != ""
}

// bootstrapRemoval is the ExtraConfig that removes the bootstrap data
// from a VM whose guest consumed it (an empty value deletes a key), with
// the mark that it was removed; nil when there is none to remove. A key
// that is not there is not sent: vCenter would take an empty value for a
// new key as a change.
func bootstrapRemoval(extra []types.BaseOptionValue) []types.BaseOptionValue {
	var changes []types.BaseOptionValue
	for _, o := range extra {
		v := o.GetOptionValue()
		if v == nil {
			continue
		}
		if v.Key == userDataRemoved {
			return nil
		}
		for _, k := range bootstrapKeys {
			if v.Key == k {
				changes = append(changes, &types.OptionValue{Key: k, Value: ""})
			}
		}
	}
	if len(changes) == 0 {
		return nil
	}
	return append(changes, &types.OptionValue{Key: userDataRemoved, Value: "true"})
}

// removeBootstrap removes the bootstrap data from vm, read as m, once its
// guest consumed it; nothing is sent otherwise.
func removeBootstrap(ctx context.Context, vm *object.VirtualMachine, m mo.VirtualMachine) error {
	if m.Config == nil || !bootstrapConsumed(m) {
		return nil
	}
	changes := bootstrapRemoval(m.Config.ExtraConfig)
	if len(changes) == 0 {
		return nil
	}
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: changes})
	if err == nil {
		_, err = awaitTask(ctx, task)
	}
	if err != nil {
		return fmt.Errorf("removing the consumed bootstrap data: %w", err)
	}
	return nil
}

// guestInfoChanges is the ExtraConfig that hands the user data to the
// guest's agent (cloud-init: user data and metadata; Ignition: its config
// and Afterburn's network arguments), or nil when the VM already carries
// it (or there is no user data: then guest customization configures
// static addresses). A VM whose guest consumed it (m's power, Tools and
// address say so) gets it removed instead, and one it was removed from
// never gets it again.
func guestInfoChanges(m mo.VirtualMachine, spec providers.MachineSpec) ([]types.BaseOptionValue, error) {
	cfg := m.Config
	for _, o := range cfg.ExtraConfig {
		if v := o.GetOptionValue(); v != nil && v.Key == userDataRemoved {
			return nil, nil
		}
	}
	if bootstrapConsumed(m) {
		return bootstrapRemoval(cfg.ExtraConfig), nil
	}
	if spec.UserData == nil {
		return nil, nil
	}
	want, keys, err := guestInfo(object.VirtualDeviceList(cfg.Hardware.Device), spec)
	if err != nil {
		return nil, err
	}
	have := map[string]string{}
	for _, o := range cfg.ExtraConfig {
		if v := o.GetOptionValue(); v != nil {
			if _, ok := want[v.Key]; ok {
				have[v.Key], _ = v.Value.(string)
			}
		}
	}
	var changes []types.BaseOptionValue
	for _, k := range keys {
		if have[k] != want[k] {
			changes = append(changes, &types.OptionValue{Key: k, Value: want[k]})
		}
	}
	return changes, nil
}

// guestInfo is the guestinfo the VM's agent reads, and its keys in order.
func guestInfo(devices object.VirtualDeviceList, spec providers.MachineSpec) (map[string]string, []string, error) {
	if spec.Ignition() {
		want := map[string]string{
			guestInfoIgnition:         base64.StdEncoding.EncodeToString(spec.UserData),
			guestInfoIgnitionEncoding: "base64",
		}
		keys := []string{guestInfoIgnition, guestInfoIgnitionEncoding}
		kargs, err := ignition.NetworkKargs(spec.NICs, macAddresses(devices), guestHostName(spec))
		if err != nil {
			return nil, nil, err
		}
		if kargs != "" {
			want[guestInfoNetworkKargs] = kargs
			keys = append(keys, guestInfoNetworkKargs)
		}
		return want, keys, nil
	}
	meta, err := metadata(devices, spec)
	if err != nil {
		return nil, nil, err
	}
	want := map[string]string{
		guestInfoUserData:         base64.StdEncoding.EncodeToString(spec.UserData),
		guestInfoUserDataEncoding: "base64",
		guestInfoMetaData:         base64.StdEncoding.EncodeToString(meta),
		guestInfoMetaDataEncoding: "base64",
	}
	return want, []string{guestInfoUserData, guestInfoUserDataEncoding, guestInfoMetaData, guestInfoMetaDataEncoding}, nil
}

// macAddresses are the VM's NICs' MAC addresses, in device order.
func macAddresses(devices object.VirtualDeviceList) []string {
	var macs []string
	for _, card := range devices.SelectByType((*types.VirtualEthernetCard)(nil)) {
		macs = append(macs, card.(types.BaseVirtualEthernetCard).GetVirtualEthernetCard().MacAddress)
	}
	return macs
}

// metadata is cloud-init's instance metadata: the instance ID (so cloud-init
// runs once per VM, not once per boot), the host name, and a netplan v2
// network matching each NIC by its MAC address.
func metadata(devices object.VirtualDeviceList, spec providers.MachineSpec) ([]byte, error) {
	macs := macAddresses(devices)
	md := map[string]any{"instance-id": cloudinit.InstanceID(spec), "local-hostname": guestHostName(spec)}
	if len(spec.NICs) > 0 {
		network, err := cloudinit.NetworkConfig(spec.NICs, macs)
		if err != nil {
			return nil, err
		}
		md["network"] = network
	}
	return json.Marshal(md)
}
