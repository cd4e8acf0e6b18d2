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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Cluster is an InfraCluster of any backend as the generic cluster
// controller sees it: an object with the common spec and status every
// kind embeds.
type Cluster interface {
	metav1.Object
	runtime.Object
	// CommonSpec and CommonStatus point into the object.
	CommonSpec() *CommonClusterSpec
	CommonStatus() *CommonClusterStatus
}

// CommonSpec implements Cluster.
func (c *VSphereCluster) CommonSpec() *CommonClusterSpec { return &c.Spec.CommonClusterSpec }

// CommonStatus implements Cluster.
func (c *VSphereCluster) CommonStatus() *CommonClusterStatus { return &c.Status.CommonClusterStatus }

// CommonSpec implements Cluster.
func (c *LibvirtCluster) CommonSpec() *CommonClusterSpec { return &c.Spec.CommonClusterSpec }

// CommonStatus implements Cluster.
func (c *LibvirtCluster) CommonStatus() *CommonClusterStatus { return &c.Status.CommonClusterStatus }

// CommonSpec implements Cluster.
func (c *ProxmoxCluster) CommonSpec() *CommonClusterSpec { return &c.Spec.CommonClusterSpec }

// CommonStatus implements Cluster.
func (c *ProxmoxCluster) CommonStatus() *CommonClusterStatus { return &c.Status.CommonClusterStatus }
