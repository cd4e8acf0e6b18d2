// Package capi proves banlieue's infrastructure CRDs against Cluster API's
// own controllers. It is a separate module so that Cluster API's weight stays
// out of the banlieue binary's dependencies.
package capi
