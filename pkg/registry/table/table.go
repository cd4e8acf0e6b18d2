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
// Package table builds the kubectl table view (Accept: as=Table) of
// banlieue.io objects from a list of columns and a cell function per kind.
package table

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
)

// CellsFunc returns the cells of one object, without the NAME and AGE
// columns, which every table gets.
type CellsFunc func(obj runtime.Object) ([]interface{}, error)

// Column is a column between NAME and AGE.
type Column struct {
	Name        string
	Type        string
	Description string
	// Priority 0 columns always show; higher ones only with -o wide.
	Priority int32
}

type convertor struct {
	columns []metav1.TableColumnDefinition
	cells   CellsFunc
}

// New returns a TableConvertor printing NAME, the given columns, then AGE.
func New(cells CellsFunc, columns ...Column) rest.TableConvertor {
	defs := []metav1.TableColumnDefinition{{
		Name: "Name", Type: "string", Format: "name",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["name"],
	}}
	for _, c := range columns {
		defs = append(defs, metav1.TableColumnDefinition{Name: c.Name, Type: c.Type, Description: c.Description, Priority: c.Priority})
	}
	defs = append(defs, metav1.TableColumnDefinition{
		Name: "Age", Type: "date",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
	})
	return &convertor{columns: defs, cells: cells}
}

func (c *convertor) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	out := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		out.ColumnDefinitions = c.columns
	}
	addRow := func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		cells, err := c.cells(o)
		if err != nil {
			return err
		}
		row := metav1.TableRow{Object: runtime.RawExtension{Object: o}}
		row.Cells = append(row.Cells, m.GetName())
		row.Cells = append(row.Cells, cells...)
		row.Cells = append(row.Cells, age(m.GetCreationTimestamp()))
		out.Rows = append(out.Rows, row)
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, addRow); err != nil {
			return nil, err
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			out.ResourceVersion = l.GetResourceVersion()
			out.Continue = l.GetContinue()
			out.RemainingItemCount = l.GetRemainingItemCount()
		}
	} else {
		if err := addRow(obj); err != nil {
			return nil, err
		}
		if m, err := meta.Accessor(obj); err == nil {
			out.ResourceVersion = m.GetResourceVersion()
		}
	}
	return out, nil
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// ConditionStatus returns the status of the condition of the given type, or
// "Unknown" when it is not there yet.
func ConditionStatus(conds []metav1.Condition, condType string) string {
	if c := meta.FindStatusCondition(conds, condType); c != nil {
		return string(c.Status)
	}
	return string(metav1.ConditionUnknown)
}

// Unexpected is the error for an object of the wrong type.
func Unexpected(obj runtime.Object) error {
	return fmt.Errorf("unexpected object of type %T", obj)
}

// ConditionReason returns the reason of the condition of the given type,
// or "" when it is not there yet.
func ConditionReason(conds []metav1.Condition, condType string) string {
	if c := meta.FindStatusCondition(conds, condType); c != nil {
		return c.Reason
	}
	return ""
}
