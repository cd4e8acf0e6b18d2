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

// Package artifacts embeds the install manifests, so that "banlieue
// bootstrap" installs, and "banlieue dev" sets up a cluster, exactly as the
// shipped files say, with no checkout needed at run time. The examples are
// package artifacts/examples (the local environment's, not the product's).
package artifacts

import "embed"

// Deploy holds artifacts/deploy (kustomize bases for a real cluster).
//
//go:embed deploy
var Deploy embed.FS

// CRDs holds artifacts/crds (the generated infrastructure CRDs).
//
//go:embed crds/*.yaml
var CRDs embed.FS

// CAPI holds artifacts/capi (the Cluster API manager's ClusterRole,
// clusterctl's metadata and the sources of the cluster templates), from
// which the clusterctl repository is rendered.
//
//go:embed capi
var CAPI embed.FS
