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
package authz

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// policy allows verb on every object of the resource, or only on names.
type policy struct {
	wide  bool
	names map[string]bool
	asked []string
}

func (p *policy) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	p.asked = append(p.asked, a.GetName())
	if p.wide || (a.GetName() != "" && p.names[a.GetName()]) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "not granted", nil
}

func (p *policy) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(p.Authorize(ctx, a))
}

func (p *policy) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func TestAnyNameFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		policy    policy
		object    string
		resource  bool
		want      authorizer.Decision
		wantAsked []string
	}{
		{"wide grant answers without the name", policy{wide: true}, "vm-1", true, authorizer.DecisionAllow, []string{""}},
		{"resourceNames grant falls through to the name", policy{names: map[string]bool{"vm-1": true}}, "vm-1", true, authorizer.DecisionAllow, []string{"", "vm-1"}},
		{"another name stays denied", policy{names: map[string]bool{"vm-1": true}}, "vm-2", true, authorizer.DecisionNoOpinion, []string{"", "vm-2"}},
		{"no grant", policy{}, "vm-1", true, authorizer.DecisionNoOpinion, []string{"", "vm-1"}},
		{"collection requests are asked once", policy{wide: true}, "", true, authorizer.DecisionAllow, []string{""}},
		{"non-resource requests are asked as they are", policy{}, "", false, authorizer.DecisionNoOpinion, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.policy
			attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "alice"}, Verb: "get", Namespace: "team-a",
				APIGroup: "banlieue.io", Resource: "virtualmachines", Name: tc.object, ResourceRequest: tc.resource}
			got, _, err := AnyNameFirst(&p).Authorize(context.Background(), attrs)
			if err != nil || got != tc.want {
				t.Errorf("decision %v (%v), want %v", got, err, tc.want)
			}
			// Conditions-aware callers get the same answer.
			asked := p.asked
			p.asked = nil
			if d := AnyNameFirst(&p).ConditionsAwareAuthorize(context.Background(), attrs); d.IsAllow() != (tc.want == authorizer.DecisionAllow) {
				t.Errorf("conditions-aware decision %v, want %v", d, tc.want)
			}
			p.asked = asked
			if len(p.asked) != len(tc.wantAsked) {
				t.Fatalf("asked about %q, want %q", p.asked, tc.wantAsked)
			}
			for i := range p.asked {
				if p.asked[i] != tc.wantAsked[i] {
					t.Errorf("asked about %q, want %q", p.asked, tc.wantAsked)
				}
			}
		})
	}
}
