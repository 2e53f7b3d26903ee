package schema_test

import (
	"testing"

	"github.com/herald-notify/herald/schema"
)

// Processes that migrate one database at the same moment (several test
// packages, or a worker and an API started together) all succeed: the one
// that waits does not hold up the other's CREATE INDEX CONCURRENTLY into a
// deadlock.
func TestConcurrentMigrationsAllSucceed(t *testing.T) {
	dbURL := freshDatabase(t)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := schema.Up(dbURL)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("a concurrent migration failed: %v", err)
		}
	}
}
