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

// Package authz makes delegated authorization cheap for requests on named
// objects. The delegating authorizer asks kube-apiserver (a
// SubjectAccessReview) and caches the answer by the full request
// attributes, name included, so every new object costs a round trip (make
// bench counted three per provisioned VM). A review without a name means
// "any object of that kind"; when it allows, every name is allowed, and
// that answer is cached once per user, verb and resource.
package authz

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// AnyNameFirst asks delegate about the whole resource before the named
// object; only a refusal there (a user limited to some resourceNames, or
// none) falls through to the named question.
func AnyNameFirst(delegate authorizer.Authorizer) authorizer.Authorizer {
	return anyNameFirst{delegate}
}

type anyNameFirst struct{ delegate authorizer.Authorizer }

func (a anyNameFirst) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.IsResourceRequest() && attrs.GetName() != "" {
		if d, reason, err := a.delegate.Authorize(ctx, anyName{attrs}); err == nil && d == authorizer.DecisionAllow {
			return d, reason, nil
		}
	}
	return a.delegate.Authorize(ctx, attrs)
}

// ConditionsAwareAuthorize does the same for conditions-aware callers: only
// an unconditional allow of the whole resource answers for the name.
func (a anyNameFirst) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	if attrs.IsResourceRequest() && attrs.GetName() != "" {
		if d := a.delegate.ConditionsAwareAuthorize(ctx, anyName{attrs}); d.IsAllow() && d.Error() == nil {
			return d
		}
	}
	return a.delegate.ConditionsAwareAuthorize(ctx, attrs)
}

// EvaluateConditions is the delegate's.
func (a anyNameFirst) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return a.delegate.EvaluateConditions(ctx, d, data)
}

// anyName is attrs without the object's name.
type anyName struct{ authorizer.Attributes }

func (anyName) GetName() string { return "" }
