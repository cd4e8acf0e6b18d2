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
package apiserver

import (
	"net/http"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// WithoutAnonymous turns away requests that authn would let in only as
// system:anonymous: they are unauthenticated (401), whatever path they ask
// for. A standalone server uses it unless told to admit anonymous requests.
func WithoutAnonymous(authn authenticator.Request) authenticator.Request {
	return authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		resp, ok, err := authn.AuthenticateRequest(req)
		if ok && resp != nil && resp.User != nil && resp.User.GetName() == user.Anonymous {
			return nil, false, nil
		}
		return resp, ok, err
	})
}
