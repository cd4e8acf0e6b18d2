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

package virtualmachine

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// reasonWaitingForIPAddress: a pool interface's claim has no address yet.
const reasonWaitingForIPAddress = "WaitingForIPAddress"

// claimName is the IPAddressClaim of vm's interface iface.
func claimName(vm *v1alpha1.VirtualMachine, iface string) string { return vm.Name + "-" + iface }

// claimAddresses makes sure every pool interface of resolved has its
// IPAddressClaim (Cluster API's IPAM contract, owned by the VM) and, once
// each is fulfilled, writes the IPAddress into the interface as its static
// address. It returns why the machine must wait ("" when it need not).
func (r *Reconciler) claimAddresses(ctx context.Context, vm *v1alpha1.VirtualMachine, resolved *v1alpha1.ResolvedVirtualMachine) (string, string, error) {
	var waiting []string
	reason := reasonWaitingForIPAddress
	for i := range resolved.Spec.Interfaces {
		n := &resolved.Spec.Interfaces[i]
		if n.Mode != v1alpha1.IPAMPool || n.Pool == nil {
			continue
		}
		claim, err := r.ensureClaim(ctx, vm, n)
		if err != nil {
			return "", "", err
		}
		if claim.Status.AddressRef.Name == "" {
			msg := fmt.Sprintf("interface %s: IPAddressClaim %s waits for an address from %s %s", n.Name, claim.Name, n.Pool.Kind, n.Pool.Name)
			if c := meta.FindStatusCondition(claim.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse && c.Reason != "" {
				reason, msg = c.Reason, fmt.Sprintf("interface %s: %s", n.Name, c.Message)
			}
			waiting = append(waiting, msg)
			continue
		}
		address := &ipamv1.IPAddress{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: claim.Status.AddressRef.Name}, address); err != nil {
			if apierrors.IsNotFound(err) {
				waiting = append(waiting, fmt.Sprintf("interface %s: IPAddress %s is not known yet", n.Name, claim.Status.AddressRef.Name))
				continue
			}
			return "", "", err
		}
		n.Static = &v1alpha1.StaticIPConfig{Address: address.Spec.Address, Prefix: address.Spec.Prefix, Gateway: address.Spec.Gateway}
	}
	if len(waiting) > 0 {
		return reason, strings.Join(waiting, "; "), nil
	}
	return "", "", nil
}

func (r *Reconciler) ensureClaim(ctx context.Context, vm *v1alpha1.VirtualMachine, n *v1alpha1.ResolvedInterface) (*ipamv1.IPAddressClaim, error) {
	claim := &ipamv1.IPAddressClaim{}
	key := client.ObjectKey{Namespace: vm.Namespace, Name: claimName(vm, n.Name)}
	err := r.Client.Get(ctx, key, claim)
	if err == nil || !apierrors.IsNotFound(err) {
		return claim, err
	}
	claim = &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{NameLabel: "banlieue", VMLabel: vm.Name}},
		Spec:       ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: n.Pool.APIGroup, Kind: n.Pool.Kind, Name: n.Pool.Name}},
	}
	if err := controllerutil.SetControllerReference(vm, claim, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("claiming an address for interface %s: %w", n.Name, err)
	}
	r.event(vm, "Normal", "AddressClaimed", "Provisioning", fmt.Sprintf("created IPAddressClaim %s on %s %s", claim.Name, n.Pool.Kind, n.Pool.Name))
	return claim, nil
}

// releaseAddresses deletes vm's claims (their addresses go with them);
// done is true once none is left.
func (r *Reconciler) releaseAddresses(ctx context.Context, vm *v1alpha1.VirtualMachine) (bool, error) {
	var claims ipamv1.IPAddressClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(vm.Namespace), client.MatchingLabels{VMLabel: vm.Name}); err != nil {
		if meta.IsNoMatchError(err) {
			return true, nil
		}
		return false, err
	}
	left := false
	for i := range claims.Items {
		c := &claims.Items[i]
		if !metav1.IsControlledBy(c, vm) {
			continue
		}
		left = true
		if c.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, c, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("releasing IPAddressClaim %s: %w", c.Name, err)
			}
		}
	}
	return !left, nil
}
