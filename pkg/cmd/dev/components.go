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

package dev

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/artifacts"
	"github.com/firestoned/banlieue/pkg/devenv"
)

// components runs banlieue's controller and providers for banlieue dev:
// with a real node, as the shipped Deployments (pods of the release
// image, their settings in the shipped ConfigMaps); without one, as
// processes with their containers' arguments (devenv's process mode).
type components struct {
	env  *devenv.Env
	pods bool
	// deployments are those applied, for rolledOut.
	deployments []string
}

// controller applies the shipped controller Deployment. Without a node
// the environment runs the controller (Config.Controllers).
func (c *components) controller(ctx context.Context) error {
	if !c.pods {
		return nil
	}
	if err := devenv.ApplyFiles(ctx, c.env.Admin, artifacts.Deploy, "deploy/base/deployment-controller.yaml"); err != nil {
		return fmt.Errorf("applying the controller Deployment: %w", err)
	}
	c.deployments = append(c.deployments, "banlieue-controller")
	return nil
}

// provider runs backend's provider with settings: keys of its shipped
// ConfigMap (BANLIEUE_ and a flag's name), which a process gets as flags.
func (c *components) provider(ctx context.Context, backend string, settings map[string]string) error {
	if !c.pods {
		_, err := c.env.StartProvider(backend, "provider-"+backend, time.Minute, flagsOf(settings)...)
		return err
	}
	dir := "deploy/providers/" + backend + "/"
	if err := c.applyConfig(ctx, dir+"config.yaml", podSettings(settings)); err != nil {
		return err
	}
	if err := devenv.ApplyFiles(ctx, c.env.Admin, artifacts.Deploy, dir+"deployment.yaml"); err != nil {
		return fmt.Errorf("applying the %s provider's Deployment: %w", backend, err)
	}
	c.deployments = append(c.deployments, "banlieue-provider-"+backend)
	return nil
}

// podSettings are settings with what a process of banlieue dev gets from
// devenv besides: inventories walked every minute (5m as shipped), and the
// console endpoint on (off as shipped; it publishes the pod's address,
// which banlieue's API server reaches on the node's bridge).
func podSettings(settings map[string]string) map[string]string {
	out := map[string]string{"BANLIEUE_RESYNC": "1m", "BANLIEUE_CONSOLE_BIND_ADDRESS": ":8444"}
	for k, v := range settings {
		out[k] = v
	}
	return out
}

// applyConfig creates or updates the shipped ConfigMap file with settings
// changed, as an administrator edits it before applying it.
func (c *components) applyConfig(ctx context.Context, file string, settings map[string]string) error {
	data, err := fs.ReadFile(artifacts.Deploy, file)
	if err != nil {
		return err
	}
	shipped := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(data, shipped); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	cl, err := adminClient(c.env)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: shipped.ObjectMeta}
	_, err = controllerutil.CreateOrUpdate(ctx, cl, cm, func() error {
		cm.Labels, cm.Data = shipped.Labels, shipped.Data
		for k, v := range settings {
			cm.Data[k] = v
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("applying %s: %w", file, err)
	}
	return nil
}

// rolledOut waits for the rollout of every Deployment applied.
func (c *components) rolledOut(ctx context.Context) error {
	return c.env.RolledOut(ctx, devenv.Namespace, 3*time.Minute, c.deployments...)
}

// reach is the URL at which the components reach the loopback server of
// rawURL: the node's bridge gateway for pods.
func (c *components) reach(rawURL string) (string, error) {
	if !c.pods {
		return rawURL, nil
	}
	return c.env.ExposeURL(rawURL)
}

// servingIPs are the addresses, besides loopback, a simulator's
// certificate must name for the components to reach it.
func (c *components) servingIPs() []net.IP {
	if !c.pods {
		return nil
	}
	return []net.IP{net.ParseIP(c.env.NodeGateway())}
}

// flagsOf turns ConfigMap settings into the flags they stand for:
// BANLIEUE_DOMAIN_TYPE=qemu is --domain-type=qemu.
func flagsOf(settings map[string]string) []string {
	var out []string
	for k, v := range settings {
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "BANLIEUE_"), "_", "-"))
		out = append(out, "--"+name+"="+v)
	}
	sort.Strings(out)
	return out
}
