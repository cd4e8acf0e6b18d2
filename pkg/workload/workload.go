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
// Package workload is what "banlieue operator" runs for a ProviderClass: the
// Deployment, metrics Service, ServiceAccount, Role and RoleBinding of each
// Provider's provider (or of the class's one shared provider), and the
// subjects of its backend's ClusterRoleBinding, as server-side apply
// configurations. It is pure: the operator applies what
// it returns, tests read it, and nothing here talks to a cluster.
package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
)

// FieldManager is the operator's server-side apply field manager.
const FieldManager = "banlieue-operator"

// Labels the operator puts on what it makes, to find a workload's Providers.
const (
	// ClassLabel names the ProviderClass of a workload.
	ClassLabel = "banlieue.io/provider-class"
	// ProviderLabel names the Provider of a per-Provider workload.
	ProviderLabel = "banlieue.io/provider"
	// ManagedByLabel marks what the operator made; an admission policy
	// lets the operator write and delete only objects carrying it
	// (artifacts/deploy/operator/policy.yaml).
	ManagedByLabel = "app.kubernetes.io/managed-by"
)

// Ports of the provider container.
const (
	MetricsPort = 8443
	HealthPort  = 8081
)

// MetricsServicePort names the metrics Service's port, as the static
// providers' Services do (artifacts/deploy/providers/*/service.yaml): the
// port the shipped ServiceMonitor scrapes.
const MetricsServicePort = "https-metrics"

// maxName keeps generated names short enough for the pods, ReplicaSets and
// label values derived from them (63 characters with their suffixes).
const maxName = 52

// Workload is the namespaced objects serving one Provider (PerProvider) or
// all of a class's Providers of its namespace (Shared). What a provider does
// cluster-wide is its backend's shipped ClusterRole (BackendClusterRole),
// granted through the backend's shipped ClusterRoleBinding, whose subjects
// the operator keeps (Subjects): the operator creates no cluster-scoped
// RBAC and may bind nothing else.
type Workload struct {
	Namespace, Name string
	// ServiceAccountName is the identity its pods run as
	// (ServiceAccountName).
	ServiceAccountName string
	ServiceAccount     *corev1ac.ServiceAccountApplyConfiguration
	Role               *rbacv1ac.RoleApplyConfiguration
	RoleBinding        *rbacv1ac.RoleBindingApplyConfiguration
	Deployment         *appsv1ac.DeploymentApplyConfiguration
	// Service fronts the Deployment's metrics port (MetricsServicePort),
	// labelled as the static providers' metrics Services are, so that
	// artifacts/monitoring's ServiceMonitor scrapes it too.
	Service *corev1ac.ServiceApplyConfiguration
}

// Name is the workload's name: banlieue-provider-CLASS for a shared one,
// banlieue-provider-CLASS-PROVIDER for one Provider's, ending in a hash of
// the whole when that would be too long.
func Name(class, provider string) string {
	full := "banlieue-provider-" + class
	if provider != "" {
		full += "-" + provider
	}
	return shorten(full, maxName)
}

// ProviderServiceAccountPrefix begins the ServiceAccount name of every
// per-Provider workload: the prefix and the Provider's name, never
// shortened (a Provider's name is a DNS label, so the whole stays a valid
// ServiceAccount name). The admission policy keeping such a workload to its
// own Provider's machines (artifacts/deploy/operator/policy.yaml) reads the
// Provider back from the request's user name; a dot cannot occur in the
// static install's or a shared workload's names, so neither matches.
const ProviderServiceAccountPrefix = "banlieue-provider."

// ServiceAccountName is the ServiceAccount of the workload: a shared one's
// is its Name, a per-Provider one's ProviderServiceAccountPrefix and the
// Provider's name.
func ServiceAccountName(class, provider string) string {
	if provider == "" {
		return Name(class, "")
	}
	return ProviderServiceAccountPrefix + provider
}

// MetricsServiceSuffix ends the name of a workload's metrics Service (its
// Name and the suffix: at most 60 characters, a DNS label beginning with a
// letter), as the static providers' banlieue-provider-BACKEND-metrics: a
// rendered one takes a static one's name only where its Deployment would
// take the static Deployment's too.
const MetricsServiceSuffix = "-metrics"

// MetricsServiceName is the metrics Service of the workload.
func MetricsServiceName(class, provider string) string {
	return Name(class, provider) + MetricsServiceSuffix
}

// LeaseName is the Lease a provider's replicas take turns with, as "banlieue
// provider --provider" names it.
func LeaseName(class, provider string) string {
	if provider == "" {
		return "banlieue-provider-" + class
	}
	return "banlieue-provider-" + class + "-" + provider
}

func shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := "-" + hex.EncodeToString(sum[:4])
	return s[:limit-len(suffix)] + suffix
}

// BackendClusterRole is the shipped ClusterRole of backend's provider
// workloads (artifacts/deploy/operator/rbac-BACKEND.yaml): its machines in
// every namespace, VMImages, Events, Cluster API Machines and Clusters,
// metrics authentication. No Secret: those are granted by name in each
// workload's Role, and user data where a namespace consents.
func BackendClusterRole(backend string) string { return "banlieue-provider-" + backend + "-workload" }

// BackendClusterRoleBinding is the shipped binding of BackendClusterRole
// whose subjects are the ServiceAccounts of backend's workloads.
func BackendClusterRoleBinding(backend string) string {
	return "banlieue-provider-" + backend + "-workloads"
}

// Served is one Provider the operator runs a workload for.
type Served struct {
	Class    *v1alpha1.ProviderClass
	Provider string
}

// Subjects are the ServiceAccounts of the workloads serving these
// Providers, sorted and without duplicates (a shared workload serves many):
// the subjects of their backend's ClusterRoleBinding.
func Subjects(served []Served) []rbacv1.Subject {
	seen := map[rbacv1.Subject]bool{}
	var out []rbacv1.Subject
	for _, s := range served {
		only := s.Provider
		if s.Class.Spec.DeploymentStrategy == v1alpha1.ProviderDeploymentShared {
			only = ""
		}
		sub := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountName(s.Class.Name, only), Namespace: s.Class.Spec.Namespace}
		if !seen[sub] {
			seen[sub] = true
			out = append(out, sub)
		}
	}
	slices.SortFunc(out, func(a, b rbacv1.Subject) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// ClassOwner is the owner reference of what a class owns.
func ClassOwner(class *v1alpha1.ProviderClass) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().WithAPIVersion(v1alpha1.SchemeGroupVersion.String()).WithKind("ProviderClass").
		WithName(class.Name).WithUID(class.UID)
}

// ProviderOwner is the controller reference of a per-Provider workload.
func ProviderOwner(p *v1alpha1.Provider) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().WithAPIVersion(v1alpha1.SchemeGroupVersion.String()).WithKind("Provider").
		WithName(p.Name).WithUID(p.UID).WithController(true).WithBlockOwnerDeletion(true)
}

// Inputs are what a workload depends on besides its class and Providers.
type Inputs struct {
	// SharedProviderNamespace is the install's shared-Provider namespace
	// (empty: the providers' default).
	SharedProviderNamespace string
	// CloudConfigs are the Secrets of the Providers' namespace holding the
	// cloud configs of the VMImages the class serves (CloudConfigs): the
	// provider reads them by name, as its credentials.
	CloudConfigs []string
}

// CloudConfigs are the Secrets the images class serves name: their
// cloud-config Secrets, and an import's mirror credentials
// (spec.import.secretRef), sorted and without duplicates.
func CloudConfigs(class string, imgs []v1alpha1.VMImage) []string {
	var out []string
	add := func(name string) {
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for i := range imgs {
		img := &imgs[i]
		imported := images.Serves(img, class)
		if !imported && !slices.ContainsFunc(img.Spec.Sources, func(s v1alpha1.ImageSource) bool { return s.ProviderClass == class }) {
			continue
		}
		for _, cc := range img.Spec.CloudConfigs {
			add(cc.SecretRef.Name)
		}
		if imported && img.Spec.Import.SecretRef != nil {
			add(img.Spec.Import.SecretRef.Name)
		}
	}
	slices.Sort(out)
	return out
}

// ForProvider is the workload of Provider p alone (PerProvider): its Role
// reads p, its status and its credentials and CA bundle by name, nothing
// else of the namespace. Its namespaced objects are owned by p, so that
// deleting p collects them.
func ForProvider(class *v1alpha1.ProviderClass, p *v1alpha1.Provider, in Inputs) Workload {
	return build(class, p.Namespace, p.Name, []v1alpha1.Provider{*p}, ProviderOwner(p), in)
}

// Shared is the class's one workload for the Providers of its namespace:
// its Role reads every Provider there (their set changes) and the
// credentials of those given by name. The class owns it.
func Shared(class *v1alpha1.ProviderClass, providers []v1alpha1.Provider, in Inputs) Workload {
	return build(class, class.Spec.Namespace, "", providers, ClassOwner(class), in)
}

func build(class *v1alpha1.ProviderClass, namespace, only string, served []v1alpha1.Provider, owner *metav1ac.OwnerReferenceApplyConfiguration, in Inputs) Workload {
	name := Name(class.Name, only)
	labels := map[string]string{
		"app.kubernetes.io/name": "banlieue", "app.kubernetes.io/component": "provider-" + class.Spec.Backend,
		ManagedByLabel: FieldManager, ClassLabel: class.Name,
	}
	if only != "" {
		labels[ProviderLabel] = only
	}
	w := Workload{Namespace: namespace, Name: name, ServiceAccountName: ServiceAccountName(class.Name, only)}
	w.ServiceAccount = corev1ac.ServiceAccount(w.ServiceAccountName, namespace).WithLabels(labels).WithOwnerReferences(owner)
	w.Role = rbacv1ac.Role(name, namespace).WithLabels(labels).WithOwnerReferences(owner).WithRules(rules(class.Name, only, served, in.CloudConfigs)...)
	w.RoleBinding = rbacv1ac.RoleBinding(name, namespace).WithLabels(labels).WithOwnerReferences(owner).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(w.ServiceAccountName).WithNamespace(namespace))
	selector := podSelector(class, only)
	w.Deployment = deployment(class, namespace, name, only, in.SharedProviderNamespace, labels, selector, owner)
	w.Service = service(namespace, name, labels, selector, owner)
	return w
}

// podSelector picks the workload's pods: its class's, of its backend, and
// its Provider's when it has one. (A shared workload's selector also
// matches the pods of a per-Provider one of the same class, which exist
// only while the operator removes the other shape after a strategy
// change.)
func podSelector(class *v1alpha1.ProviderClass, only string) map[string]string {
	selector := map[string]string{ClassLabel: class.Name, "app.kubernetes.io/component": "provider-" + class.Spec.Backend}
	if only != "" {
		selector[ProviderLabel] = only
	}
	return selector
}

// service is the workload's metrics Service: ClusterIP, the Deployment's
// own pod selector, one port targeting the container's metrics port by
// name.
func service(namespace, name string, labels, selector map[string]string, owner *metav1ac.OwnerReferenceApplyConfiguration) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(name+MetricsServiceSuffix, namespace).WithLabels(labels).WithOwnerReferences(owner).
		WithSpec(corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).WithSelector(selector).
			WithPorts(corev1ac.ServicePort().WithName(MetricsServicePort).WithProtocol(corev1.ProtocolTCP).
				WithPort(MetricsPort).WithTargetPort(intstr.FromString("metrics"))))
}

// rules are a provider's namespaced permissions: its Providers (one by
// name, or all when shared), their status, the credentials and CA bundles
// they name (get by name only), its Lease and Events.
func rules(class, only string, served []v1alpha1.Provider, cloudConfigs []string) []*rbacv1ac.PolicyRuleApplyConfiguration {
	// No write of providers itself: its status and its finalizer go
	// through their subresources, so the workload cannot rename the
	// Secrets its Role grants (the operator renders them from the spec).
	providerRule := rbacv1ac.PolicyRule().WithAPIGroups(v1alpha1.GroupName).WithResources("providers").
		WithVerbs("get", "list", "watch")
	statusRule := rbacv1ac.PolicyRule().WithAPIGroups(v1alpha1.GroupName).WithResources("providers/status", "providers/finalizers").
		WithVerbs("update", "patch")
	if only != "" {
		// list and watch with a metadata.name field selector are
		// authorized as requests for that name.
		providerRule.WithResourceNames(only)
		statusRule.WithResourceNames(only)
	}
	out := []*rbacv1ac.PolicyRuleApplyConfiguration{providerRule, statusRule}
	secrets, configMaps := referenced(served)
	for _, name := range cloudConfigs {
		if !slices.Contains(secrets, name) {
			secrets = append(secrets, name)
		}
	}
	slices.Sort(secrets)
	if len(secrets) > 0 {
		out = append(out, rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("secrets").WithVerbs("get").WithResourceNames(secrets...))
	}
	if len(configMaps) > 0 {
		out = append(out, rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").WithVerbs("get").WithResourceNames(configMaps...))
	}
	return append(out,
		// A Lease is created before it has a name to authorize by.
		rbacv1ac.PolicyRule().WithAPIGroups("coordination.k8s.io").WithResources("leases").WithVerbs("create"),
		rbacv1ac.PolicyRule().WithAPIGroups("coordination.k8s.io").WithResources("leases").WithVerbs("get", "update", "patch").
			WithResourceNames(LeaseName(class, only)),
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("events").WithVerbs("create", "patch"),
	)
}

// referenced are the Secrets and ConfigMaps the Providers name, sorted.
func referenced(served []v1alpha1.Provider) (secrets, configMaps []string) {
	add := func(list []string, name string) []string {
		if name == "" || slices.Contains(list, name) {
			return list
		}
		return append(list, name)
	}
	for _, p := range served {
		c := p.Spec.Connection
		secrets = add(secrets, c.CredentialsRef.Name)
		if ca := c.CABundle; ca != nil {
			if ca.SecretRef != nil {
				secrets = add(secrets, ca.SecretRef.Name)
			}
			if ca.ConfigMapRef != nil {
				configMaps = add(configMaps, ca.ConfigMapRef.Name)
			}
		}
	}
	slices.Sort(secrets)
	slices.Sort(configMaps)
	return secrets, configMaps
}

// Args are the provider container's arguments. sharedNamespace is the
// install's shared-Provider namespace, which the provider's machine check
// must agree on with the scheduler (omitted when empty: the default).
func Args(class *v1alpha1.ProviderClass, namespace, only, sharedNamespace string) []string {
	args := []string{"provider", class.Spec.Backend, "--namespace=" + namespace, "--leader-elect",
		"--service-account=" + namespace + ":" + ServiceAccountName(class.Name, only),
		"--metrics-bind-address=:" + strconv.Itoa(MetricsPort), "--health-probe-bind-address=:" + strconv.Itoa(HealthPort)}
	if only != "" {
		args = append(args, "--provider="+only)
	}
	if sharedNamespace != "" {
		args = append(args, "--shared-provider-namespace="+sharedNamespace)
	}
	if class.Spec.LogLevel != nil {
		args = append(args, fmt.Sprintf("-v=%d", *class.Spec.LogLevel))
	}
	return args
}

func deployment(class *v1alpha1.ProviderClass, namespace, name, only, sharedNamespace string, labels, selector map[string]string, owner *metav1ac.OwnerReferenceApplyConfiguration) *appsv1ac.DeploymentApplyConfiguration {
	probe := func(path string) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString("health")))
	}
	container := corev1ac.Container().WithName("provider").WithImage(class.Spec.Image).
		WithArgs(Args(class, namespace, only, sharedNamespace)...).
		// The pod's address, which a console endpoint publishes
		// (--console-advertise-host's default), as the shipped
		// Deployments give it.
		WithEnv(corev1ac.EnvVar().WithName("POD_IP").WithValueFrom(corev1ac.EnvVarSource().
			WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("status.podIP")))).
		WithPorts(corev1ac.ContainerPort().WithName("metrics").WithContainerPort(MetricsPort),
			corev1ac.ContainerPort().WithName("health").WithContainerPort(HealthPort)).
		WithReadinessProbe(probe("/readyz")).
		WithLivenessProbe(probe("/healthz").WithInitialDelaySeconds(10)).
		WithResources(resources(class.Spec.Resources)).
		WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).WithReadOnlyRootFilesystem(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))).
		// The only writable place, as in the shipped Deployments: the
		// temporary directory, where a vSphere qcow2 import stages its
		// image (the release image has no /tmp of its own).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"))
	pod := corev1ac.PodSpec().WithServiceAccountName(ServiceAccountName(class.Name, only)).
		WithVolumes(corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource())).
		WithSecurityContext(corev1ac.PodSecurityContext().WithRunAsNonRoot(true).WithRunAsUser(65532).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(container)
	replicas := int32(1)
	if class.Spec.Replicas != nil {
		replicas = *class.Spec.Replicas
	}
	return appsv1ac.Deployment(name, namespace).WithLabels(labels).WithOwnerReferences(owner).
		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(pod)))
}

func resources(r *v1alpha1.ProviderResources) *corev1ac.ResourceRequirementsApplyConfiguration {
	out := corev1ac.ResourceRequirements()
	if r == nil {
		return out
	}
	list := func(m map[string]resource.Quantity) corev1.ResourceList {
		l := corev1.ResourceList{}
		for k, v := range m {
			l[corev1.ResourceName(k)] = v
		}
		return l
	}
	if len(r.Requests) > 0 {
		out.WithRequests(list(r.Requests))
	}
	if len(r.Limits) > 0 {
		out.WithLimits(list(r.Limits))
	}
	return out
}
