package workflows_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWorkflowsImportNoStore: workflow code reaches activities only through
// activities/contract, so neither the store nor a database driver is among its
// dependencies (a workflow cannot call the database by mistake).
func TestWorkflowsImportNoStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"/internal/store", "github.com/jackc/pgx", "/activities", "/providers"} {
			if strings.Contains(pkg, banned) && !strings.HasSuffix(pkg, "/activities/contract") {
				t.Errorf("workflows depends on %s", pkg)
			}
		}
	}
}
