package activities_test

import (
	"reflect"
	"testing"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
)

// TestContractNamesAreActivities: workflows call activities by the names in
// activities/contract and the worker registers the methods of Activities, so
// every name must be a method (a rename on one side fails here, not in production).
func TestContractNamesAreActivities(t *testing.T) {
	typ := reflect.TypeOf(&activities.Activities{})
	for _, name := range contract.Names {
		if _, ok := typ.MethodByName(name); !ok {
			t.Errorf("contract.%s is not a method of activities.Activities", name)
		}
	}
	if typ.NumMethod() != len(contract.Names) {
		t.Errorf("activities.Activities has %d methods, contract names %d: name every activity in contract", typ.NumMethod(), len(contract.Names))
	}
}
