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

package provider

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// ReasonLocationChanged: a field saying where the VM is was edited after
// the provider recorded where it builds the VM (status.location). The CRD
// refuses such edits only once spec.providerID is set; before that (a
// first build in progress) the provider refuses them itself: the VM stays,
// and is destroyed, where it was built.
const ReasonLocationChanged = "LocationChanged"

// builtFailureDomain is the failure domain m's VM is built in: the one
// status.location recorded; for a machine built before that record, the
// status.failureDomain it reported; else its spec's.
func builtFailureDomain(m infrav1.Machine) string {
	st := m.CommonStatus()
	switch {
	case st.Location != nil:
		return st.Location.FailureDomain
	case st.FailureDomain != "":
		return st.FailureDomain
	}
	return m.CommonSpec().FailureDomain
}

// builtIn is m as its VM is built: in the failure domain its status
// recorded (builtFailureDomain), whatever its spec says now, so that its
// Provider is found, and its VM looked for and destroyed, where it is.
// m itself is not changed.
func builtIn(m infrav1.Machine) infrav1.Machine {
	fd := builtFailureDomain(m)
	if fd == m.CommonSpec().FailureDomain {
		return m
	}
	built := copyOf(m)
	built.CommonSpec().FailureDomain = fd
	return built
}

// builtSpec is what the backend builds for m on provider (machineSpec),
// at the place status.location recorded when it did, with the spec fields
// edited since that record (moved, sorted; none without a record).
func (r *MachineReconciler) builtSpec(m infrav1.Machine, provider *v1alpha1.Provider) (spec providers.MachineSpec, fields providers.Fields, moved []string) {
	spec, fields = r.machineSpec(builtIn(m), provider)
	rec := m.CommonStatus().Location
	if rec == nil {
		return spec, fields, nil
	}
	asked, _ := r.machineSpec(m, provider)
	moved = movedFields(m, rec, asked, fields)
	spec.Location = failuredomain.Location{Datacenter: rec.Datacenter, Cluster: rec.Cluster, Host: rec.Host}
	if len(fields.LocationOptions) > 0 {
		spec.Options = maps.Clone(spec.Options)
		if spec.Options == nil {
			spec.Options = map[string]string{}
		}
		for k := range fields.LocationOptions {
			spec.Options[k] = rec.Options[k]
		}
	}
	return spec, fields, moved
}

// movedFields are the spec fields of m that no longer say what rec
// recorded: asked is the spec built from m as it is now.
func movedFields(m infrav1.Machine, rec *infrav1.BuiltLocation, asked providers.MachineSpec, fields providers.Fields) []string {
	var out []string
	if m.CommonSpec().FailureDomain != rec.FailureDomain {
		out = append(out, "spec.failureDomain")
	}
	if asked.Location != (failuredomain.Location{Datacenter: rec.Datacenter, Cluster: rec.Cluster, Host: rec.Host}) {
		// Without fields of its own the location is the failure domain's.
		out = append(out, cmp.Or(fields.Location, "spec.failureDomain"))
	}
	for k, field := range fields.LocationOptions {
		if asked.Options[k] != rec.Options[k] {
			out = append(out, field)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// builtLocation is the record of spec's place (status.location), in
// failure domain fd.
func builtLocation(fd string, spec providers.MachineSpec, fields providers.Fields) *infrav1.BuiltLocation {
	rec := &infrav1.BuiltLocation{FailureDomain: fd, Datacenter: spec.Location.Datacenter, Cluster: spec.Location.Cluster, Host: spec.Location.Host}
	for k := range fields.LocationOptions {
		if v := spec.Options[k]; v != "" {
			if rec.Options == nil {
				rec.Options = map[string]string{}
			}
			rec.Options[k] = v
		}
	}
	return rec
}

// locationChanged is the Ready message of a machine whose fields moved
// were edited after its VM's place was recorded.
func locationChanged(vm string, rec *infrav1.BuiltLocation, moved []string) string {
	where := failuredomain.Location{Datacenter: rec.Datacenter, Cluster: rec.Cluster, Host: rec.Host}.String()
	if rec.FailureDomain != "" {
		where = rec.FailureDomain + "=" + where
	}
	return fmt.Sprintf("%s changed after VM %s was placed in %s: the VM stays there, and is destroyed there; "+
		"restore the field(s), or make a new machine to move it", strings.Join(moved, ", "), vm, where)
}
