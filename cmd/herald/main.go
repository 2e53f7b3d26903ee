// Command herald runs Herald: the REST API, the Temporal worker, or both (dev), and
// administers it (migrations, tenants, API keys).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	_ "time/tzdata" // time zones work on minimal images too

	"github.com/herald-notify/herald/internal/config"
)

const usage = `herald — multi-tenant notification service on Temporal

Usage (running and administering Herald):
  herald api                     serve the REST API
  herald worker                  run the Temporal worker
  herald dev                     migrate (schema and search attributes), ensure a demo tenant and its dev
                                 API key (.herald/dev-api-key), run API + worker
  herald migrate [--temporal-wait D] [up|down N|force N|version|search-attributes]
                                 apply (default) or roll back schema migrations; up also registers
                                 Herald's Temporal search attributes when HERALD_TEMPORAL_ADDRESS is set
                                 (search-attributes: only those; --temporal-wait: retry that long)
  herald key list --tenant T     list a tenant's API keys (id, prefix, name, created, last used, revoked; never the key)
  herald key create --tenant T [--name N]
                                 create an API key and print it (shown once)
  herald key revoke --tenant T [--force] KEY_ID
                                 revoke a key (--force: even the tenant's last active one)
  herald tenant create --name N  create a tenant and print its API key (shown once)
  herald tenant list             list tenants
  herald tenant limits --tenant ID [--rate R] [--burst B] [--daily-quota Q] [--allow-critical=true|false]
                                 show or set (operator) a tenant's API limits and its right to send
                                 critical notifications; a flag left out keeps its value, 0 = default
  herald tenant delete --confirm ID [--batch N] [--skip-temporal] ID
                                 remove a tenant and all its data (keys revoked, workflows terminated,
                                 every table emptied in bounded batches; run again to resume)
  herald data usage [--tenant ID]
                                 rows, bytes and oldest row per table (estimates at bounded cost),
                                 and the biggest tenants of each table; --tenant: one tenant's

Configuration comes from the environment; see docs/configuration.md (HERALD_DATABASE_URL,
HERALD_TEMPORAL_ADDRESS, HERALD_TEMPORAL_NAMESPACE, HERALD_HTTP_ADDR, ...).

Usage (a tenant's work through the REST API: HERALD_URL, default http://127.0.0.1:8080,
and HERALD_KEY, the tenant's API key; docs/cli.md):
  herald users import [--format csv|ndjson] FILE
                                 create or update users from a CSV or NDJSON file
  herald lists upload [--name N] [--format csv|ndjson] FILE
                                 upload a recipient list; prints its id
  herald campaign start --template T (--list L | --users a,b | --topic X | --all-users)
                        [--id ID] [--data JSON] [--channels c,d] [--rate R] [--send-at T] [--watch]
                                 start a campaign (the same --id again is a duplicate)
  herald campaign watch ID       show a campaign's progress until it ends
  herald campaign pause|resume|cancel ID
  herald send --user U --template T [--data JSON] [--channels c,d] [--key K] [--send-at T] [--wait]
                                 send one notification (--wait: until every channel is final)
Uploads and watch draw a live progress bar on a terminal and print a plain line every
--interval otherwise. Exit status: 0 done (campaign completed; send delivered or sent),
1 error, 2 usage, 3 campaign failed (send: not delivered), 4 campaign cancelled,
5 campaign paused.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(ctx, os.Args[1:], os.Stdout, log); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		var exit *exitError
		if errors.As(err, &exit) {
			if exit.msg != "" {
				fmt.Fprintln(os.Stderr, "herald:", exit.msg)
			}
			os.Exit(exit.code)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "herald") { // the client's errors name Herald already
			msg = "herald: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout io.Writer, log *slog.Logger) error {
	if len(args) == 0 {
		return errUsage
	}
	if isRemoteCommand(args) {
		return runRemote(ctx, args, stdout)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	switch args[0] {
	case "api":
		return runServices(ctx, cfg, log, true, false)
	case "worker":
		return runServices(ctx, cfg, log, false, true)
	case "dev":
		return runDev(ctx, cfg, stdout, log)
	case "migrate":
		return runMigrate(ctx, cfg, args[1:], stdout, log)
	case "key":
		return runKey(ctx, cfg, args[1:], stdout)
	case "tenant":
		return runTenant(ctx, cfg, args[1:], stdout)
	case "data":
		return runData(ctx, cfg, args[1:], stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return errUsage
	}
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	return fs
}
