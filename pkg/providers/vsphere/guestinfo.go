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
	"encoding/base64"
	"encoding/json"

	"github.com/vmware/govmomi/object"
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

// guestInfoChanges is the ExtraConfig that hands the user data to the
// guest's agent (cloud-init: user data and metadata; Ignition: its config
// and Afterburn's network arguments), or nil when the VM already carries
// it (or there is no user data: then guest customization configures
// static addresses).
func guestInfoChanges(cfg *types.VirtualMachineConfigInfo, spec providers.MachineSpec) ([]types.BaseOptionValue, error) {
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
