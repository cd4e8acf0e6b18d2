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
	"strconv"
	"strings"
)

// Major is the major version of the guest OS: the leading number of its
// version ("22.04" is 22, "9" is 9, "2022" is 2022, "2012r2" is 2012); 0
// when it starts with none.
func (g *GuestOS) Major() int {
	v := strings.TrimSpace(g.Version)
	end := 0
	for end < len(v) && end < 9 && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}
