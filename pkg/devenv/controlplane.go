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

package devenv

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/firestoned/banlieue/pkg/generated/clientset/versioned/scheme"
	"github.com/firestoned/banlieue/pkg/loopback"
	"github.com/firestoned/banlieue/pkg/pki"
)

// The control plane: etcd, kube-apiserver, kube-controller-manager, the
// APIService registration, and the kubeconfigs of its users.

// EtcdURL is the client URL of the environment's etcd.
func (e *Env) EtcdURL() string { return e.etcdURL() }

func (e *Env) etcdURL() string { return e.memberURL(0) }

func (e *Env) etcdMembers() int { return max(e.cfg.EtcdMembers, 1) }

// memberPorts are member i's client and peer ports.
func (e *Env) memberPorts(i int) (client, peer int) {
	if i == 0 {
		return e.ports.etcdClient, e.ports.etcdPeer
	}
	return e.ports.etcdMembers[i-1][0], e.ports.etcdMembers[i-1][1]
}

func (e *Env) memberURL(i int) string {
	c, _ := e.memberPorts(i)
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c))
}

// etcdServers lists every member's client URL, for --etcd-servers.
func (e *Env) etcdServers() string {
	var urls []string
	for i := range e.etcdMembers() {
		urls = append(urls, e.memberURL(i))
	}
	return strings.Join(urls, ",")
}

func (e *Env) pickPorts() error {
	members, replicas := e.etcdMembers()-1, 0
	if n := e.cfg.BanlieueReplicas; n > 1 {
		replicas = n
	}
	// All at once: none is bound before every one is picked, and no two
	// may be the same.
	ports, err := loopback.FreePorts(4 + 2*members + replicas)
	if err != nil {
		return err
	}
	next := func() int { p := ports[0]; ports = ports[1:]; return p }
	for _, p := range []*int{&e.ports.etcdClient, &e.ports.etcdPeer, &e.ports.kubeAPIServer, &e.ports.banlieue} {
		*p = next()
	}
	for range members {
		e.ports.etcdMembers = append(e.ports.etcdMembers, [2]int{next(), next()})
	}
	if replicas > 0 {
		e.ports.replicas = make([]int, replicas)
		for i := range e.ports.replicas {
			e.ports.replicas[i] = next()
		}
	}
	return nil
}

func (e *Env) startEtcd(ctx context.Context) error {
	n := e.etcdMembers()
	if len(e.etcd) < n {
		e.etcd = make([]*process, n)
	}
	// One member keeps the names it always had; a cluster's are numbered.
	name := func(i int) (member, process, data string) {
		if n == 1 {
			return "devenv", "etcd", "etcd"
		}
		return fmt.Sprintf("devenv-%d", i), fmt.Sprintf("etcd-%d", i), fmt.Sprintf("etcd-%d", i)
	}
	var cluster []string
	for i := range n {
		member, _, _ := name(i)
		_, peer := e.memberPorts(i)
		cluster = append(cluster, member+"=http://127.0.0.1:"+strconv.Itoa(peer))
	}
	var started []int
	for i := range n {
		if e.etcd[i] != nil {
			continue
		}
		member, proc, data := name(i)
		_, peer := e.memberPorts(i)
		args := []string{
			"--name=" + member,
			"--data-dir=" + filepath.Join(e.cfg.Dir, data),
			"--listen-client-urls=" + e.memberURL(i),
			"--advertise-client-urls=" + e.memberURL(i),
			"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(peer),
			"--initial-advertise-peer-urls=http://127.0.0.1:" + strconv.Itoa(peer),
			"--initial-cluster=" + strings.Join(cluster, ","),
			"--listen-metrics-urls=",
			"--log-level=warn",
		}
		if !e.cfg.Durable {
			args = append(args, "--unsafe-no-fsync")
		}
		p, err := e.startProcess(proc, filepath.Join(e.cfg.BinDir, "etcd"), args...)
		if err != nil {
			return err
		}
		e.etcd[i] = p
		started = append(started, i)
	}
	// Members become healthy together, once they have a quorum.
	for _, i := range started {
		url := e.memberURL(i) + "/health"
		if err := pollProcess(ctx, e.etcd[i], time.Minute, func(ctx context.Context) bool { return httpGetOK(ctx, nil, url) }); err != nil {
			return err
		}
	}
	return nil
}

func (e *Env) startKubeAPIServer(ctx context.Context) error {
	pkiDir := filepath.Join(e.cfg.Dir, "pki")
	f := func(name string) string { return filepath.Join(pkiDir, name) }
	args := []string{
		"--etcd-servers=" + e.etcdServers(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(e.ports.kubeAPIServer),
		// No kubernetes Service endpoints on loopback addresses.
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--tls-cert-file=" + f("kube-apiserver.crt"),
		"--tls-private-key-file=" + f("kube-apiserver.key"),
		"--client-ca-file=" + f("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		// The aggregation layer: kube-apiserver authenticates users, then
		// proxies with its front-proxy client certificate and the user in headers.
		"--requestheader-client-ca-file=" + f("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + f("front-proxy-client.crt"),
		"--proxy-client-key-file=" + f("front-proxy-client.key"),
		"--anonymous-auth=true",
		"--profiling=false",
	}
	if e.cfg.Node {
		args = append(args, e.nodeAPIServerArgs()...)
	}
	args = append(args, e.cfg.KubeAPIServerArgs...)
	p, err := e.startProcess("kube-apiserver", filepath.Join(e.cfg.BinDir, "kube-apiserver"), args...)
	if err != nil {
		return err
	}
	e.KubeAPIServerURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.kubeAPIServer))
	admin, err := e.ca.IssueClient("banlieue-dev-admin", "system:masters")
	if err != nil {
		return err
	}
	e.AdminKubeconfig = filepath.Join(e.cfg.Dir, "kubeconfigs", "admin.kubeconfig")
	if err := e.writeKubeconfig(e.AdminKubeconfig, "admin", admin); err != nil {
		return err
	}
	if e.Admin, err = clientcmd.BuildConfigFromFlags("", e.AdminKubeconfig); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	if err := pollProcess(ctx, p, 3*time.Minute, func(ctx context.Context) bool {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	}); err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w", err)
	}
	_, err = e.serviceAccountKubeconfig("banlieue", BanlieueUser)
	return err
}

// serviceAccountKubeconfig writes, once per environment start, the
// kubeconfig of a component running as a ServiceAccount: its user name and
// groups carried by a client certificate, since there is no Pod and so no
// projected token. It returns the file's path. A file left by an earlier
// start is rewritten: the CA is new at every start.
func (e *Env) serviceAccountKubeconfig(name, user string) (string, error) {
	path := filepath.Join(e.cfg.Dir, "kubeconfigs", name+".kubeconfig")
	if e.issued[path] {
		return path, nil
	}
	if e.issued == nil {
		e.issued = map[string]bool{}
	}
	// system:serviceaccount:NAMESPACE:NAME is in system:serviceaccounts:NAMESPACE.
	saNamespace := strings.Split(user, ":")[2]
	ident, err := e.ca.IssueClient(user, "system:serviceaccounts", "system:serviceaccounts:"+saNamespace)
	if err != nil {
		return "", err
	}
	if err := e.writeKubeconfig(path, name, ident); err != nil {
		return "", err
	}
	e.issued[path] = true
	return path, nil
}

func (e *Env) startKubeControllerManager() error {
	kc := e.AdminKubeconfig
	// clusterrole-aggregation folds banlieue's roles into view, edit and
	// admin, as in any cluster.
	controllers := "namespace,garbagecollector,clusterrole-aggregation"
	var extra []string
	if e.cfg.Node {
		pkiDir := filepath.Join(e.cfg.Dir, "pki")
		controllers += "," + nodeControllers
		extra = []string{"--service-account-private-key-file=" + filepath.Join(pkiDir, "sa.key"), "--root-ca-file=" + filepath.Join(pkiDir, "ca.crt")}
	}
	_, err := e.startProcess("kube-controller-manager", filepath.Join(e.cfg.BinDir, "kube-controller-manager"),
		append([]string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--controllers=" + controllers,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
			"--use-service-account-credentials=false",
		}, extra...)...,
	)
	return err
}

// registerAPIService points kube-apiserver's aggregator at banlieue through
// an ExternalName Service to localhost, with banlieue's CA as caBundle, and
// waits for the APIService to be Available.
func (e *Env) registerAPIService(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: APIServerNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Named apart from the install's Service (artifacts/deploy), so that the
	// shipped manifests can be applied over this environment.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: loopbackService, Namespace: APIServerNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(e.ports.banlieue)}},
		},
	}
	if err := upsert(ctx, func() error {
		_, err := client.CoreV1().Services(APIServerNamespace).Create(ctx, svc, metav1.CreateOptions{})
		return err
	}, func() error {
		cur, err := client.CoreV1().Services(APIServerNamespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec = svc.Spec
		_, err = client.CoreV1().Services(APIServerNamespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("service: %w", err)
	}

	agg, err := aggregatorclient.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	port := int32(e.ports.banlieue)
	apiService := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: APIServiceName},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "banlieue.io", Version: "v1alpha1",
			GroupPriorityMinimum: 1000, VersionPriority: 15,
			Service:  &apiregistrationv1.ServiceReference{Namespace: APIServerNamespace, Name: loopbackService, Port: &port},
			CABundle: e.BanlieueCA,
		},
	}
	apis := agg.ApiregistrationV1().APIServices()
	if err := upsert(ctx, func() error {
		_, err := apis.Create(ctx, apiService, metav1.CreateOptions{})
		return err
	}, func() error {
		cur, err := apis.Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec = apiService.Spec
		_, err = apis.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("apiservice: %w", err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cur, err := apis.Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				last = fmt.Sprintf("%s: %s", c.Reason, c.Message)
				return c.Status == apiregistrationv1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available (%s): %w", APIServiceName, last, err)
	}
	// Available can come a moment before kube-apiserver proxies to it (a
	// first request then gets 503): wait until one goes through.
	rc, err := restclient.RESTClientFor(aggregatedREST(e.Admin))
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		res := rc.Get().AbsPath("/apis/banlieue.io/v1alpha1/vmclasses").Param("limit", "1").Do(ctx)
		if err := res.Error(); err != nil {
			last = err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("banlieue.io not served through kube-apiserver (%s): %w", last, err)
	}
	klog.InfoS("banlieue APIService available", "apiservice", APIServiceName)
	return nil
}

// aggregatedREST is cfg for plain JSON requests to any path.
func aggregatedREST(cfg *restclient.Config) *restclient.Config {
	c := restclient.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = restclient.DefaultKubernetesUserAgent()
	}
	return c
}

func upsert(_ context.Context, create, update func() error) error {
	err := create()
	if apierrors.IsAlreadyExists(err) {
		return update()
	}
	return err
}

// UserKubeconfig writes a kubeconfig for a user authenticated by a client
// certificate (common name = user, organisations = groups) and returns its path.
func (e *Env) UserKubeconfig(user string, groups ...string) (string, error) {
	path := filepath.Join(e.cfg.Dir, "kubeconfigs", safeName(user)+".kubeconfig")
	if path == e.AdminKubeconfig {
		return "", fmt.Errorf("user %q would overwrite the administrator's kubeconfig", user)
	}
	kp, err := e.ca.IssueClient(user, groups...)
	if err != nil {
		return "", err
	}
	return path, e.writeKubeconfig(path, safeName(user), kp)
}

func (e *Env) writeKubeconfig(path, user string, kp *pki.KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devenv"] = &clientcmdapi.Cluster{Server: e.KubeAPIServerURL, CertificateAuthorityData: e.ca.CertPEM}
	auth := &clientcmdapi.AuthInfo{}
	if kp != nil {
		auth.ClientCertificateData, auth.ClientKeyData = kp.CertPEM, kp.KeyPEM
	}
	cfg.AuthInfos[user] = auth
	cfg.Contexts["devenv"] = &clientcmdapi.Context{Cluster: "devenv", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "devenv"
	return clientcmd.WriteToFile(*cfg, path)
}

// StartEtcd starts the etcd members that are down (again) on their ports
// and data, and waits until they are healthy.
func (e *Env) StartEtcd(ctx context.Context) error { return e.startEtcd(ctx) }
