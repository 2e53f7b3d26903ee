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
