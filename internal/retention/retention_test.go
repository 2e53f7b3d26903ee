package retention

import (
	"reflect"
	"testing"
	"time"
)

// Every field of Fields reaches its own field of a Policy and of a Tenant,
// each field once: a setting added to one and not the others, or wired to
// the wrong one, fails here.
func TestFieldsReachEveryTenantSetting(t *testing.T) {
	if n := reflect.TypeFor[Tenant]().NumField(); n != len(Fields) || reflect.TypeFor[Policy]().NumField() != len(Fields) {
		t.Fatalf("Fields lists %d settings, Tenant has %d, Policy %d", len(Fields), n, reflect.TypeFor[Policy]().NumField())
	}
	seen := map[string]bool{}
	for _, f := range Fields {
		if (f.Dur == nil) != (f.TenantDur == nil) || (f.Int == nil) != (f.TenantInt == nil) || (f.Dur == nil) == (f.Int == nil) {
			t.Fatalf("%s: the operator's and the tenant's accessors are not of one kind", f.Name)
		}
		var tn Tenant
		tn.Set(f.Name, 1)
		got := tn.Policy(Defaults)
		want := Defaults
		if f.Dur != nil {
			*f.Dur(&want) = time.Second
		} else {
			*f.Int(&want) = 1
		}
		if got != want {
			t.Fatalf("Set(%q, 1) gives the policy %+v, want %+v", f.Name, got, want)
		}
		raw := reflect.ValueOf(tn)
		for i := range raw.NumField() {
			if !raw.Field(i).IsZero() {
				name := reflect.TypeFor[Tenant]().Field(i).Tag.Get("json")
				if seen[name] {
					t.Fatalf("%s and another setting share the tenant's field %s", f.Name, name)
				}
				seen[name] = true
			}
		}
	}
	// A longer setting than the operator's is not taken; an unknown name
	// changes nothing.
	var tn Tenant
	tn.Set("audit", int64(2*Defaults.Audit/time.Second))
	tn.Set("no_such_setting", 1)
	if tn.Policy(Defaults) != Defaults {
		t.Fatalf("a longer setting lengthened the policy: %+v", tn.Policy(Defaults))
	}
}
