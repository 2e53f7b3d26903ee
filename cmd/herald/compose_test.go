package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestComposePublishesOnlyTheAPIBeyondLoopback: in docker-compose.yml every
// published port is bound to 127.0.0.1 except the Herald API's; Temporal's gRPC
// frontend and UI have no authentication there, and neither PostgreSQL is
// published. (A small line scanner: the repository carries no YAML dependency of
// its own for one test.)
func TestComposePublishesOnlyTheAPIBeyondLoopback(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	service := regexp.MustCompile(`^  ([a-z0-9-]+):\s*$`)
	item := regexp.MustCompile(`^\s+-\s+"?([^"#\s]+)"?`)
	published := map[string][]string{}
	var current string
	inPorts := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if m := service.FindStringSubmatch(line); m != nil {
			current, inPorts = m[1], false
			continue
		}
		if !strings.HasPrefix(line, "    ") { // a top-level key ends the services
			if !strings.HasPrefix(line, "  ") {
				current = ""
			}
			continue
		}
		if strings.TrimSpace(line) == "ports:" {
			inPorts = true
			continue
		}
		if inPorts {
			if m := item.FindStringSubmatch(line); m != nil && current != "" {
				published[current] = append(published[current], m[1])
				continue
			}
			inPorts = false
		}
	}
	if len(published["temporal"]) == 0 || len(published["temporal-ui"]) == 0 || len(published["herald-api"]) == 0 {
		t.Fatalf("the scanner found no ports for temporal, temporal-ui or herald-api: %v", published)
	}
	for svc, ports := range published {
		for _, p := range ports {
			if svc == "herald-api" {
				continue
			}
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q beyond loopback; bind it to 127.0.0.1 (and say so) or document why not", svc, p)
			}
		}
	}
	for _, db := range []string{"herald-db", "temporal-db"} {
		if len(published[db]) > 0 {
			t.Errorf("%s publishes %v", db, published[db])
		}
	}
}

// TestComposeMigrateRegistersSearchAttributes: in docker-compose.yml the one-shot
// herald-migrate runs `herald migrate` with HERALD_TEMPORAL_ADDRESS set (the
// shared environment), waiting for Temporal, so it registers the search
// attributes too; no other service does (TestSearchAttributeNamesOnlyInGo), and
// the API and the worker start only once it has finished.
func TestComposeMigrateRegistersSearchAttributes(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{} // top-level anchors and services, by name
	var name string
	header := regexp.MustCompile(`^(?:  )?([a-z][a-z0-9-]*):`) // "x-herald-env:", "  herald-migrate:"
	for _, line := range strings.Split(string(raw), "\n") {
		if m := header.FindStringSubmatch(line); m != nil {
			name = m[1]
		}
		blocks[name] += line + "\n"
	}
	if !strings.Contains(blocks["x-herald-env"], "HERALD_TEMPORAL_ADDRESS: temporal:7233") {
		t.Errorf("the shared Herald environment sets no HERALD_TEMPORAL_ADDRESS:\n%s", blocks["x-herald-env"])
	}
	migrate := blocks["herald-migrate"]
	for _, want := range []string{`command: ["migrate", "--temporal-wait", `, "environment: *herald-env", "temporal:\n"} {
		if !strings.Contains(migrate, want) {
			t.Errorf("herald-migrate lacks %q:\n%s", want, migrate)
		}
	}
	for _, svc := range []string{"herald-api", "herald-worker"} {
		if !strings.Contains(blocks[svc], "herald-migrate:\n        condition: service_completed_successfully") {
			t.Errorf("%s does not wait for herald-migrate:\n%s", svc, blocks[svc])
		}
	}
}
