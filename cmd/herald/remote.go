package main

// The client commands: campaign teams' work through the REST API with a tenant
// key (HERALD_URL, HERALD_KEY), built on package client. They need no database
// or Temporal address, unlike the operator commands.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/herald-notify/herald/client"
)

// Exit statuses of the client commands beyond 0 (done), 1 (an error: Herald
// refused, or could not be reached) and 2 (usage).
const (
	exitCampaignFailed    = 3
	exitCampaignCancelled = 4
	exitCampaignPaused    = 5
	exitNotDelivered      = 3 // herald send --wait: ended neither delivered nor sent
)

// exitError ends the command with status code after printing msg (if any).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// isRemoteCommand says whether args name a client command.
func isRemoteCommand(args []string) bool {
	switch args[0] {
	case "users", "lists", "campaign", "send":
		return true
	}
	return false
}

// remote is what every client command shares: the client, where it prints, and
// whether that is a terminal (a live bar) or not (plain lines).
type remote struct {
	c        *client.Client
	out      io.Writer
	terminal bool
}

func newRemote(out io.Writer) (*remote, error) {
	base := os.Getenv("HERALD_URL")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	key := os.Getenv("HERALD_KEY")
	if key == "" {
		return nil, errors.New("HERALD_KEY is not set: export the tenant's API key (hk_...)")
	}
	c, err := client.New(base, key, client.WithUserAgent("herald-cli"))
	if err != nil {
		return nil, err
	}
	return &remote{c: c, out: out, terminal: isTerminal(out)}, nil
}

func runRemote(ctx context.Context, args []string, stdout io.Writer) error {
	r, err := newRemote(stdout)
	if err != nil {
		return err
	}
	switch args[0] {
	case "users":
		if len(args) < 2 || args[1] != "import" {
			return errUsage
		}
		return r.upload(ctx, uploadUsers, args[2:])
	case "lists":
		if len(args) < 2 || args[1] != "upload" {
			return errUsage
		}
		return r.upload(ctx, uploadList, args[2:])
	case "campaign":
		if len(args) < 2 {
			return errUsage
		}
		return r.campaign(ctx, args[1], args[2:])
	case "send":
		return r.send(ctx, args[1:])
	}
	return errUsage
}

// ---- uploads

type uploadKind int

const (
	uploadList uploadKind = iota
	uploadUsers
)

// upload streams FILE to POST /v1/lists or POST /v1/users/import with a progress
// display of the bytes and lines sent.
func (r *remote) upload(ctx context.Context, kind uploadKind, args []string) error {
	name := "lists upload"
	if kind == uploadUsers {
		name = "users import"
	}
	fs := newFlagSet(name)
	format := fs.String("format", "", "csv or ndjson (default: from the file name, .csv or .ndjson/.jsonl)")
	listName := new(string)
	if kind == uploadList {
		listName = fs.String("name", "", "the list's name (default: the file name)")
	}
	interval := fs.Duration("interval", 0, "how often progress is shown (default 200ms on a terminal, 5s otherwise)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%s takes one FILE", name)
	}
	path := fs.Arg(0)
	ct, err := formatOf(*format, path)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	body := &countingReader{f: f}
	p := r.newProgress(progressUpload, st.Size(), *interval)
	p.start(func() progressState {
		b, l := body.counts()
		return progressState{done: b, lines: l}
	})
	switch kind {
	case uploadList:
		if *listName == "" {
			*listName = filepath.Base(path)
		}
		list, err := r.c.UploadList(ctx, ct, body, &client.UploadListParams{Name: listName})
		p.stop(err == nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.out, "list %s (%s): %d lines, %d members, %d unknown users%s\n", list.ListID, list.Name, list.Lines,
			list.Members, list.UnknownUsers, sample(list.UnknownSample))
	case uploadUsers:
		res, err := r.c.ImportUsers(ctx, ct, body)
		p.stop(err == nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.out, "users imported: %d users from %d lines: %d created, %d updated, %d unchanged\n",
			res.Users, res.Lines, res.Created, res.Updated, res.Unchanged)
	}
	return nil
}

func sample(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return " (e.g. " + strings.Join(ids, ", ") + ")"
}

func formatOf(flagValue, path string) (client.ListFormat, error) {
	v := strings.ToLower(flagValue)
	if v == "" {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".csv":
			v = "csv"
		case ".ndjson", ".jsonl":
			v = "ndjson"
		}
	}
	switch v {
	case "csv":
		return client.CSV, nil
	case "ndjson":
		return client.NDJSON, nil
	case "":
		return "", fmt.Errorf("%s: name the format with --format csv|ndjson", path)
	}
	return "", fmt.Errorf("--format %q: want csv or ndjson", flagValue)
}

// ---- campaigns

func (r *remote) campaign(ctx context.Context, verb string, args []string) error {
	switch verb {
	case "start":
		return r.campaignStart(ctx, args)
	case "watch":
		fs := newFlagSet("campaign watch")
		interval := fs.Duration("interval", 0, "how often the campaign is read (default 1s on a terminal, 5s otherwise)")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("campaign watch takes one campaign ID")
		}
		return r.watch(ctx, fs.Arg(0), *interval)
	case "pause", "resume", "cancel":
		fs := newFlagSet("campaign " + verb)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("campaign %s takes one campaign ID", verb)
		}
		control := map[string]func(context.Context, string) (*client.Campaign, error){
			"pause": r.c.PauseCampaign, "resume": r.c.ResumeCampaign, "cancel": r.c.CancelCampaign}[verb]
		cp, err := control(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		fmt.Fprintf(r.out, "campaign %s: %s\n", cp.CampaignID, cp.Status)
		return nil
	}
	return errUsage
}

func (r *remote) campaignStart(ctx context.Context, args []string) error {
	fs := newFlagSet("campaign start")
	template := fs.String("template", "", "the template id (required)")
	id := fs.String("id", "", "the campaign id: starting the same id again is a duplicate, not a second campaign (default: generated)")
	list := fs.String("list", "", "audience: an uploaded list's id (herald lists upload)")
	users := fs.String("users", "", "audience: user ids, comma separated")
	topic := fs.String("topic", "", "audience: a topic's subscribers")
	all := fs.Bool("all-users", false, "audience: every user")
	data := fs.String("data", "", "the template's data, a JSON object")
	channels := fs.String("channels", "", "channels, comma separated (default: every channel the template has)")
	rate := fs.Float64("rate", 0, "recipients per second at most (default: no limit)")
	sendAt := fs.String("send-at", "", "start at this time (RFC 3339) instead of now")
	watch := fs.Bool("watch", false, "then watch it to the end, as campaign watch does")
	interval := fs.Duration("interval", 0, "with --watch: how often the campaign is read")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("campaign start takes flags only (unexpected %q)", fs.Arg(0))
	}
	if *template == "" {
		return errors.New("campaign start needs --template")
	}
	req := client.CreateCampaignRequest{TemplateID: *template}
	audiences := 0
	if *list != "" {
		req.Audience.ListID, audiences = list, audiences+1
	}
	if *users != "" {
		req.Audience.UserIds, audiences = splitList(*users), audiences+1
	}
	if *topic != "" {
		req.Audience.Topic, audiences = topic, audiences+1
	}
	if *all {
		req.Audience.AllUsers, audiences = all, audiences+1
	}
	if audiences != 1 {
		return errors.New("campaign start needs exactly one audience: --list, --users, --topic or --all-users")
	}
	if *id != "" {
		req.CampaignID = id
	}
	if *data != "" {
		if err := json.Unmarshal([]byte(*data), &req.Data); err != nil {
			return fmt.Errorf("--data: a JSON object: %w", err)
		}
	}
	for _, ch := range splitList(*channels) {
		req.Channels = append(req.Channels, client.ChannelName(ch))
	}
	if *rate > 0 {
		req.RatePerSecond = client.Ptr(float32(*rate))
	}
	if *sendAt != "" {
		t, err := time.Parse(time.RFC3339, *sendAt)
		if err != nil {
			return fmt.Errorf("--send-at: %w", err)
		}
		req.SendAt = &t
	}
	acc, err := r.c.CreateCampaign(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.out, "campaign %s: %s (%s)\n", acc.CampaignID, acc.Status, acc.Dedup)
	if *watch {
		return r.watch(ctx, acc.CampaignID, *interval)
	}
	return nil
}

// watch reads the campaign every interval and shows its progress until it ends
// (completed: 0; failed, cancelled: exitCampaign...; paused: exitCampaignPaused).
func (r *remote) watch(ctx context.Context, id string, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Second
		if !r.terminal {
			interval = 5 * time.Second
		}
	}
	cp, err := r.c.GetCampaign(ctx, id)
	if err != nil {
		return err
	}
	p := r.newProgress(progressCampaign, audienceSize(cp), interval)
	for {
		p.show(progressState{done: int64(cp.RecipientsProcessed), total: audienceSize(cp), campaign: cp})
		if campaignOver(cp.Status) {
			break
		}
		select {
		case <-ctx.Done():
			p.finish(false)
			return ctx.Err()
		case <-time.After(interval):
		}
		next, err := r.c.GetCampaign(ctx, id)
		var herr *client.Error
		switch {
		case err == nil:
			cp = next
		case ctx.Err() != nil:
			p.finish(false)
			return ctx.Err()
		case errors.As(err, &herr) && herr.Status < 500 && herr.Status != http.StatusTooManyRequests:
			p.finish(false)
			return err
		default: // the client's retries ran out: say so, and go on reading
			p.note(fmt.Sprintf("reading the campaign failed, still trying: %v", err))
		}
	}
	p.finish(cp.Status == client.CampaignStatusCompleted)
	fmt.Fprintln(r.out, campaignSummary(cp))
	switch cp.Status {
	case client.CampaignStatusFailed:
		return &exitError{code: exitCampaignFailed}
	case client.CampaignStatusCancelled:
		return &exitError{code: exitCampaignCancelled}
	case client.CampaignStatusPaused:
		return &exitError{code: exitCampaignPaused}
	}
	return nil
}

func campaignOver(s client.CampaignStatus) bool {
	return s == client.CampaignStatusCompleted || s == client.CampaignStatusFailed ||
		s == client.CampaignStatusCancelled || s == client.CampaignStatusPaused
}

func audienceSize(cp *client.Campaign) int64 {
	if cp.Audience.Size == nil {
		return -1
	}
	return int64(*cp.Audience.Size)
}

// ---- send

func (r *remote) send(ctx context.Context, args []string) error {
	fs := newFlagSet("send")
	user := fs.String("user", "", "the recipient's user id (required)")
	template := fs.String("template", "", "the template id (required)")
	data := fs.String("data", "", "the template's data, a JSON object")
	channels := fs.String("channels", "", "channels, comma separated (default: every channel the template has)")
	key := fs.String("key", "", "the idempotency key: the same key again is a duplicate (default: generated)")
	sendAt := fs.String("send-at", "", "deliver at this time (RFC 3339) instead of now")
	wait := fs.Bool("wait", false, "wait until every channel has a final status")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *user == "" || *template == "" {
		return errors.New("send needs --user and --template")
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("send takes flags only (unexpected %q)", fs.Arg(0))
	}
	req := client.CreateNotificationRequest{UserID: *user, TemplateID: *template}
	if *data != "" {
		var d client.TemplateData
		if err := json.Unmarshal([]byte(*data), &d); err != nil {
			return fmt.Errorf("--data: a JSON object: %w", err)
		}
		req.Data = &d
	}
	for _, ch := range splitList(*channels) {
		req.Channels = append(req.Channels, client.ChannelName(ch))
	}
	if *key != "" {
		req.IdempotencyKey = key
	}
	if *sendAt != "" {
		t, err := time.Parse(time.RFC3339, *sendAt)
		if err != nil {
			return fmt.Errorf("--send-at: %w", err)
		}
		req.SendAt = &t
	}
	sent, err := r.c.CreateNotification(ctx, req)
	if err != nil {
		return err
	}
	dedup := "new"
	if sent.Duplicate {
		dedup = "duplicate of one accepted " + sent.OriginalAcceptedAt.Format(time.RFC3339)
	}
	fmt.Fprintf(r.out, "notification %s: %s (%s; idempotency key %s)\n", sent.NotificationID, sent.Status, dedup, sent.IdempotencyKey)
	if !*wait {
		return nil
	}
	for {
		n, err := r.c.GetNotification(ctx, sent.NotificationID)
		if err != nil {
			return err
		}
		if notificationOver(n.Status) {
			for _, ch := range n.Channels {
				line := fmt.Sprintf("  %s: %s", ch.Channel, ch.Status)
				if ch.Reason != nil {
					line += " (" + *ch.Reason + ")"
				}
				fmt.Fprintln(r.out, line)
			}
			fmt.Fprintf(r.out, "notification %s: %s\n", n.NotificationID, n.Status)
			if n.Status != client.NotificationStatusDelivered && n.Status != client.NotificationStatusSent {
				return &exitError{code: exitNotDelivered}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// notificationOver: no channel is still to be handled (a provider's "sent" counts:
// its receipt may come much later). Ctrl-C stops waiting for a scheduled one.
func notificationOver(s client.NotificationStatus) bool {
	switch s {
	case client.NotificationStatusQueued, client.NotificationStatusScheduled, client.NotificationStatusSending:
		return false
	}
	return true
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseFlags parses args, letting flags come after the positional argument too
// (herald campaign watch ID --interval 2s).
func parseFlags(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(pos)
}
