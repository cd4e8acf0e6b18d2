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

// Package proxmox is the Proxmox VE backend on go-proxmox (only this tree
// imports it): failure domains are nodes, images are templates cloned in
// full, and every task (clone, config, resize, power, destroy) is recorded
// before it is awaited, so that a restarted provider waits for it instead
// of starting another.
package proxmox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// Options tune the backend.
type Options struct {
	// TaskPoll is how often a task's status is read while waited for.
	TaskPoll time.Duration
	// TaskTimeout bounds one task's wait.
	TaskTimeout time.Duration
	// ISOStorage names the storage cloud-init seeds are uploaded to; the
	// node's first storage with iso content when empty.
	ISOStorage string
}

func (o Options) withDefaults() Options {
	if o.TaskPoll <= 0 {
		o.TaskPoll = 500 * time.Millisecond
	}
	if o.TaskTimeout <= 0 {
		o.TaskTimeout = 10 * time.Minute
	}
	return o
}

// Client is one Provider's logged-in API.
type Client struct {
	api *proxmox.Client
	// upload is api without the per-request timeout, for image uploads
	// (bounded by their context instead: see ImportImage).
	upload     *proxmox.Client
	endpoint   string
	httpClient *http.Client
	opts       Options
	// tlsConfig is the API's, for the console's own connections;
	// console the Secret's console user (empty: none), see console.go.
	tlsConfig *tls.Config
	console   providers.Credentials
}

// requestTimeout bounds one API request; dialTimeout its connect and
// TLS handshake.
const (
	requestTimeout = time.Minute
	dialTimeout    = 15 * time.Second
)

// Connect reaches the API at conn.Endpoint with the API token in
// conn.Credentials (Username = USER@REALM!TOKENID, Password = the secret)
// and checks it with GET /version.
func Connect(ctx context.Context, conn providers.Connection, opts Options) (*Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: conn.InsecureSkipTLSVerify} //nolint:gosec // the Provider asked for it, with a warning
	if len(conn.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(conn.CABundle) {
			return nil, fmt.Errorf("%w: the CA bundle holds no PEM certificate", providers.ErrConnect)
		}
		tlsConfig.RootCAs = pool
	}
	// Every request is bounded (a task's wait is many requests, bounded
	// by TaskTimeout); so are the connect and the handshake, so that a
	// host that accepts and never answers fails the call, not hangs it.
	hc := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{
		TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: dialTimeout}).DialContext,
		TLSHandshakeTimeout: dialTimeout,
	}}
	api := proxmox.NewClient(conn.Endpoint, proxmox.WithHTTPClient(hc),
		proxmox.WithAPIToken(conn.Credentials.Username, conn.Credentials.Password))
	if _, err := api.Version(ctx); err != nil {
		if errors.Is(err, proxmox.ErrNotAuthorized) {
			return nil, fmt.Errorf("%w: the API token was refused: %v", providers.ErrConnect, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", providers.ErrConnect, conn.Endpoint, err)
	}
	upload := proxmox.NewClient(conn.Endpoint, proxmox.WithHTTPClient(&http.Client{Transport: hc.Transport}),
		proxmox.WithAPIToken(conn.Credentials.Username, conn.Credentials.Password))
	return &Client{api: api, upload: upload, endpoint: conn.Endpoint, httpClient: hc, opts: opts.withDefaults(), tlsConfig: tlsConfig,
		console: providers.Credentials{Username: conn.Credentials.ConsoleUsername, Password: conn.Credentials.ConsolePassword}}, nil
}

// Sessions keeps one Client per Provider (see providers.Sessions). An API
// token has no session to check or end: a Client is dropped when its
// Provider goes or its settings or token change.
type Sessions = providers.Sessions[*Client]

// NewSessions returns an empty session cache.
func NewSessions(opts Options) *Sessions {
	return providers.NewSessions(providers.SessionHooks[*Client]{
		Backend: "proxmox",
		Login:   func(ctx context.Context, conn providers.Connection) (*Client, error) { return Connect(ctx, conn, opts) },
		Logout: func(_ context.Context, c *Client) {
			// No session to end; the idle connections are closed.
			c.httpClient.CloseIdleConnections()
		},
	})
}

// Inventory lists the cluster's nodes, each a failure domain.
func (c *Client) Inventory(ctx context.Context) ([]failuredomain.Location, error) {
	nodes, err := c.api.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []failuredomain.Location
	for _, n := range nodes {
		out = append(out, failuredomain.Location{Host: n.Node})
	}
	return out, nil
}

// ImageExists tells whether the cluster holds a template named ref, or
// with VMID ref (on loc's node when loc names one).
func (c *Client) ImageExists(ctx context.Context, loc failuredomain.Location, ref string) (bool, error) {
	t, err := c.template(ctx, loc.Host, ref)
	if t == nil || err != nil {
		return false, err
	}
	// Reported per node: a template elsewhere serves this node's clones
	// only through a target node, which the image's status does not claim.
	return loc.Host == "" || t.Node == loc.Host, nil
}

// template finds a template by name or VMID, preferring one on node
// (the failure domain's: no copy across nodes) to one on another node (a
// clone with a target node); nil when none. Only templates are found: a
// VM named like one (a tenant's "<namespace>.<name>" can be) is never
// taken for it.
func (c *Client) template(ctx context.Context, node, ref string) (*proxmox.VirtualMachine, error) {
	cl, err := c.api.Cluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	resources, err := cl.Resources(ctx, "vm")
	if err != nil {
		return nil, fmt.Errorf("listing VMs: %w", err)
	}
	var elsewhere *proxmox.VirtualMachine
	for _, r := range resources {
		if r.Type != "qemu" || r.Template != 1 || (r.Name != ref && fmt.Sprint(r.VMID) != ref) {
			continue
		}
		tmpl := c.api.NodeRef(r.Node).VirtualMachineRef(int(r.VMID))
		if r.Node == node {
			return tmpl, nil
		}
		if elsewhere == nil {
			elsewhere = tmpl
		}
	}
	return elsewhere, nil
}

// wait records a task, then waits for it to stop; a task that stopped
// with another exit status than OK is an error carrying it.
func (c *Client) wait(ctx context.Context, task *proxmox.Task, record providers.TaskRecorder, handle string) error {
	if err := record(ctx, handle+"/"+string(task.UPID)); err != nil {
		return fmt.Errorf("recording task %s: %w", task.UPID, err)
	}
	return c.await(ctx, task)
}

// A task is first read every quickPoll for quickPolls, then every
// TaskPoll: most tasks (a VM created, made a template, a volume deleted)
// end within a second, and each would otherwise cost up to a whole
// TaskPoll of waiting after it ended (the Proxmox VE row of
// bench/results/images.md).
const (
	quickPoll  = 100 * time.Millisecond
	quickPolls = 2 * time.Second
)

// await waits for task to stop, as go-proxmox's Wait does (its errors
// included), reading it often at first.
func (c *Client) await(ctx context.Context, task *proxmox.Task) error {
	first := min(quickPolls, c.opts.TaskTimeout)
	if c.opts.TaskPoll <= quickPoll {
		return task.Wait(ctx, c.opts.TaskPoll, c.opts.TaskTimeout)
	}
	err := task.Wait(ctx, quickPoll, first)
	if !errors.Is(err, proxmox.ErrTimeout) || first >= c.opts.TaskTimeout {
		return err
	}
	return task.Wait(ctx, c.opts.TaskPoll, c.opts.TaskTimeout-first)
}
