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

// Package count holds the counts every reliability figure is made of: the
// operations a scenario performed and had answered (Ops), what a client
// was told was done and is not there (lost), and what is there more than
// once (duplicated). They are measured from observations, never written
// by hand, and tested on crafted losses, duplicates and unanswered
// requests so a broken count cannot hide one.
package count

import (
	"cmp"
	"errors"
	"net"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Lost returns, sorted, the keys acknowledged to a client that the final
// state lacks or holds with another identity (a UID, a value): an object
// deleted and created again under the same name is lost too.
func Lost[K cmp.Ordered, V comparable](acked, stored map[K]V) []K {
	var out []K
	for k, v := range acked {
		if got, ok := stored[k]; !ok || got != v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Missing returns, sorted, the keys of want that seen does not hold.
func Missing[K cmp.Ordered](want []K, seen map[K]int) []K {
	var out []K
	for _, k := range want {
		if seen[k] == 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Sightings counts every observation of each key, before any
// de-duplication: an event delivered twice is counted twice.
func Sightings[K comparable](seen []K) map[K]int {
	out := map[K]int{}
	for _, k := range seen {
		out[k]++
	}
	return out
}

// Duplicated returns how many observations repeat a key seen before, and
// those keys, sorted.
func Duplicated[K cmp.Ordered](sightings map[K]int) (extra int, keys []K) {
	for k, n := range sightings {
		if n > 1 {
			extra += n - 1
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return extra, keys
}

// Shortfall returns how many units of want's counters got lacks, summed,
// and the keys short, sorted. Shortfall(acked, stored) is the increments
// lost; Shortfall(stored, acked) the ones applied more often than
// acknowledged.
func Shortfall[K cmp.Ordered](want, got map[K]int) (n int, keys []K) {
	for k, w := range want {
		if short := w - got[k]; short > 0 {
			n += short
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return n, keys
}

// Only keeps the sightings of keys: what else was seen (another test's
// objects, a template) is not this scenario's to count.
func Only[K comparable](sightings map[K]int, keys []K) map[K]int {
	out := map[K]int{}
	for _, k := range keys {
		if n := sightings[k]; n > 0 {
			out[k] = n
		}
	}
	return out
}

// Seen is one observation of an object (ID, its UID) that stands for Key
// (the VM it belongs to, say).
type Seen[K, V comparable] struct {
	Key K
	ID  V
}

// Distinct counts, per key, the distinct objects seen for it: the same
// object seen twice (in a watch and a list) counts once, while two objects
// for one key count twice, even if the first was gone before the second
// appeared, as when one is deleted and created again under its name.
func Distinct[K, V comparable](seen []Seen[K, V]) map[K]int {
	ids := map[Seen[K, V]]bool{}
	out := map[K]int{}
	for _, s := range seen {
		if !ids[s] {
			ids[s] = true
			out[s.Key]++
		}
	}
	return out
}

// IsAnswer reports whether err, a request's outcome, means the server
// answered: no error, any HTTP status (a 403, a 503, an AlreadyExists), or
// a TLS alert it sent. A refused connection or a timeout is not an answer.
func IsAnswer(err error) bool {
	if err == nil {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return true
	}
	// crypto/tls reports an alert from the peer as this OpError.
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// Ops counts the operations a scenario performed and had answered, each
// once however often it was retried or recorded. It is safe for concurrent
// use; its zero value counts nothing yet.
type Ops struct {
	mu       sync.Mutex
	answered map[string]bool
}

// Done records operation key's outcome: it counts if err is an answer.
func (o *Ops) Done(key string, err error) {
	if IsAnswer(err) {
		o.Answered(key)
	}
}

// Answered records that operation key was answered, as its caller checked
// (kubectl's exit status says nothing of the server's answer by itself).
func (o *Ops) Answered(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.answered == nil {
		o.answered = map[string]bool{}
	}
	o.answered[key] = true
}

// N is how many distinct operations were answered.
func (o *Ops) N() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.answered)
}
