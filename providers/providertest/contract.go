package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// ViolationsHeader is the response header in which a ContractServer lists why it
// rejected a request (one line, violations separated by " | "). The body says the
// same, one violation per entry, in the provider's own error format.
const ViolationsHeader = "X-Contract-Violations"

// ContractServer plays a provider from its own OpenAPI document (see SpecPath):
// an httptest.Server that validates every request in process with kin-openapi
// (openapi3filter.ValidateRequest) against the operation it routes to, the way
// `prism mock --errors` did:
//
//   - path and method (404 / 405 when the document has no such operation) and the
//     path, query and header parameters (e.g. AccountSid must match ^AC[0-9a-f]{32}$);
//   - security: that credentials of the scheme the document names were sent (HTTP
//     Basic for Twilio, Bearer for SendGrid), 401 otherwise; their values are not
//     checked (see checkCredentials);
//   - the body: its content type must be one the operation lists, and it must match
//     the schema (application/x-www-form-urlencoded for Twilio, decoded per the
//     schema so "Attempt=x" is not an integer; JSON for SendGrid, validated as
//     JSON Schema 2020-12 since that document is OpenAPI 3.1).
//
// A request that violates the document gets 4xx with the violations in
// ViolationsHeader and in a provider-shaped error body. A conforming one gets a
// realistic success the real SDK accepts (Twilio: 201 with a Message resource and
// a fresh SM… sid; SendGrid: 202 with an X-Message-Id header), and that answer is
// itself validated against the operation's response schema (a mismatch is a
// providertest bug and answers 500).
//
// Where kin-openapi and Prism 5 (ajv with ajv-formats; types coerced for
// parameters and form bodies, not for JSON) differ, and what is done about it:
//
//   - Formats. kin-openapi only asserts byte, date, date-time, int32 and int64 by
//     default; Prism asserts every ajv-formats format. The two the relevant
//     operations use are added here with Prism's semantics: "email" (SendGrid's
//     from/to addresses; ajv-formats' "full" regex) and "uri" (Twilio's
//     StatusCallback; absolute URI). Formats neither knows ("phone-number",
//     "date-time-rfc-2822", "currency", "uri-map" in Twilio's document) are ignored
//     by both.
//   - Form bodies. Both decode only the properties the schema declares and ignore
//     other keys, so neither enforces additionalProperties: false on a form body
//     (moot: Twilio's CreateMessageRequest does not set it). kin-openapi is
//     stricter on repeated keys: MediaUrl=a&MediaUrl=b decodes to an array, as
//     Twilio means it; Prism kept the last value only.
//   - Examples. kin-openapi would reject twilio_api_v2010.json as a whole because
//     one example, in an operation Herald does not call, contradicts its schema;
//     the document is loaded with example validation off (see readSpec). Prism
//     loaded it without checking examples.
//   - Prism answered with the operation's static example (the same sid every
//     time); this server builds the answer from the request and checks it against
//     the response schema, which Prism did not.
//
// The spec is loaded once per process per file (see loadSpec), so a server is
// cheap: make one per test. All methods are safe for concurrent use.
type ContractServer struct {
	// URL is the server's base URL (http://127.0.0.1:PORT); point the SDK here.
	URL string
	// Spec is the spec's file name (SpecSendGridMail, SpecTwilioAPI).
	Spec string

	server *httptest.Server
	spec   *contractSpec
	ops    map[string]successFunc
	reject rejectFunc

	mu       sync.Mutex
	log      bytes.Buffer
	checked  int
	rejected int
	seq      int
}

// NewContractServer starts a ContractServer for the named spec and closes it when
// the test ends. A spec that cannot be found or loaded fails the test: never a
// skip.
func NewContractServer(t testing.TB, specName string) *ContractServer {
	t.Helper()
	spec, err := loadSpec(specName)
	if err != nil {
		t.Fatalf("contract test needs the provider spec %s: %v", specName, err)
	}
	p, ok := providerAnswers[specName]
	if !ok {
		t.Fatalf("providertest has no success answers for %s: add them to providerAnswers in contract.go", specName)
	}
	s := &ContractServer{Spec: specName, spec: spec, ops: p.ops, reject: p.reject}
	fmt.Fprintf(&s.log, "%s loaded in %s (once per process)\n", spec.path, spec.loadTime.Round(time.Millisecond))
	s.server = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.server.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server.
func (s *ContractServer) Close() { s.server.Close() }

// Log returns one line per request so far (method, path, status) with the
// violations of each rejected one: print it when a contract test fails.
func (s *ContractServer) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Checked returns how many requests were validated; Rejected how many of them
// violated the spec.
func (s *ContractServer) Checked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checked
}

// Rejected returns how many requests violated the spec.
func (s *ContractServer) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

// successFunc builds the success answer for a conforming request to one
// operation.
type successFunc func(r *http.Request, body []byte, seq int) response

// rejectFunc builds the provider-shaped error body listing the violations.
type rejectFunc func(status int, spec string, violations []string) string

type answers struct {
	// ops is keyed by "METHOD /path/template" as the document spells it.
	ops    map[string]successFunc
	reject rejectFunc
}

// providerAnswers are the success answers per spec and operation, reusing the
// wire fakes' bodies and ids (sendgrid.go, twilio.go).
var providerAnswers = map[string]answers{
	SpecSendGridMail: {
		ops: map[string]successFunc{
			"POST /v3/mail/send": func(_ *http.Request, _ []byte, seq int) response {
				return sgProto{}.accept(nil, sgProto{}.newID(seq))
			},
		},
		reject: func(_ int, _ string, violations []string) string {
			errs := make([]map[string]any, len(violations))
			for i, v := range violations {
				errs[i] = map[string]any{"message": v, "field": nil, "help": nil}
			}
			b, _ := json.Marshal(map[string]any{"errors": errs})
			return string(b)
		},
	},
	SpecTwilioAPI: {
		ops: map[string]successFunc{
			"POST /2010-04-01/Accounts/{AccountSid}/Messages.json": func(r *http.Request, body []byte, _ int) response {
				if !twPath.MatchString(r.URL.Path) { // only if validation let a bad AccountSid through
					return response{status: http.StatusInternalServerError, body: TwilioError(500, 20500, "providertest: no account sid in "+r.URL.Path)}
				}
				form, _ := url.ParseQuery(string(body))
				return twProto{}.accept(&Request{Path: r.URL.Path, Form: form}, twProto{}.newID(0))
			},
		},
		// Twilio's error body, plus the list (twilio-go ignores unknown fields).
		reject: func(status int, spec string, violations []string) string {
			code := 20000 + status
			b, _ := json.Marshal(map[string]any{
				"code": code, "status": status, "more_info": "https://www.twilio.com/docs/errors/" + strconv.Itoa(code),
				"message":    "request violates " + spec + ": " + strings.Join(violations, "; "),
				"violations": violations,
			})
			return string(b)
		},
	},
}

func (s *ContractServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }

	status, violations, in := s.validate(r)
	var out response
	if len(violations) > 0 {
		out = response{status: status, body: s.reject(status, s.Spec, violations)}
	} else {
		key := r.Method + " " + in.Route.Path
		if answer := s.ops[key]; answer != nil {
			out = answer(r, body, s.nextSeq())
		} else {
			violations = []string{"providertest has no success answer for " + key + " in " + s.Spec + " (add one to providerAnswers)"}
			out = response{status: http.StatusNotImplemented}
		}
		if out.status < 300 {
			if err := s.checkAnswer(in, &out); err != nil {
				violations = append(violations, "providertest's own answer does not match the spec (a providertest bug): "+oneLine(err.Error()))
				out = response{status: http.StatusInternalServerError}
			}
		}
		if out.body == "" && len(violations) > 0 {
			out.body = s.reject(out.status, s.Spec, violations)
		}
	}
	if len(violations) > 0 {
		out.header = http.Header{ViolationsHeader: {oneLine(strings.Join(violations, " | "))}}
	}
	if out.body != "" && out.header.Get("Content-Type") == "" {
		if out.header == nil {
			out.header = http.Header{}
		}
		out.header.Set("Content-Type", "application/json")
	}
	s.record(r, out.status, violations)
	for k, vs := range out.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(out.status)
	_, _ = io.WriteString(w, out.body)
}

// validate checks r against the spec: it returns the status to answer and the
// violations (none when r conforms), and the validation input for the answer's
// check.
func (s *ContractServer) validate(r *http.Request) (int, []string, *openapi3filter.RequestValidationInput) {
	route, params, err := s.spec.router.FindRoute(r)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return http.StatusNotFound, []string{fmt.Sprintf("no path in %s matches %s", s.Spec, r.URL.Path)}, nil
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return http.StatusMethodNotAllowed, []string{fmt.Sprintf("%s defines no %s for %s", s.Spec, r.Method, r.URL.Path)}, nil
	case err != nil:
		return http.StatusBadRequest, []string{"routing: " + oneLine(err.Error())}, nil
	}
	in := requestInput(r, route, params)
	err = openapi3filter.ValidateRequest(r.Context(), in)
	if err == nil {
		return 0, nil, in
	}
	violations, security := flatten(err)
	if len(violations) == 0 { // never seen; keep the request from passing silently
		violations = []string{oneLine(err.Error())}
	}
	status := http.StatusBadRequest
	if security == len(violations) {
		status = http.StatusUnauthorized
	}
	return status, violations, in
}

func requestInput(r *http.Request, route *routers.Route, params map[string]string) *openapi3filter.RequestValidationInput {
	return &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: requestOptions}
}

// checkAnswer validates a success answer against the operation's responses.
func (s *ContractServer) checkAnswer(in *openapi3filter.RequestValidationInput, out *response) error {
	h := out.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if out.body != "" && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	out.header = h
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 out.status,
		Header:                 h,
		Body:                   io.NopCloser(strings.NewReader(out.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, SchemaValidationOptions: formatOptions},
	})
}

func (s *ContractServer) nextSeq() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

func (s *ContractServer) record(r *http.Request, status int, violations []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked++
	if len(violations) > 0 {
		s.rejected++
	}
	fmt.Fprintf(&s.log, "%s %s → %d\n", r.Method, r.URL.RequestURI(), status)
	for _, v := range violations {
		fmt.Fprintf(&s.log, "  - %s\n", v)
	}
}

// requestOptions are the validation options for every request: all violations,
// not just the first; credentials checked for presence; no defaults written into
// the body; Prism's email and uri formats.
var requestOptions = &openapi3filter.Options{
	MultiError:              true,
	AuthenticationFunc:      checkCredentials,
	SkipSettingDefaults:     true,
	SchemaValidationOptions: formatOptions,
}

// emailFormat is ajv-formats' "full" email regex (ajv-formats src/formats.ts),
// which Prism asserts for format: email.
var emailFormat = regexp.MustCompile("(?i)^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*" +
	`@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`)

var formatOptions = []openapi3.SchemaValidationOption{
	openapi3.WithStringFormatValidator("email", openapi3.NewCallbackValidator(func(v string) error {
		if !emailFormat.MatchString(v) {
			return errors.New("not an email address")
		}
		return nil
	})),
	// An absolute URI (RFC 3986: a scheme is required), as ajv-formats' "uri".
	openapi3.WithStringFormatValidator("uri", openapi3.NewCallbackValidator(func(v string) error {
		u, err := url.Parse(v)
		if err != nil {
			return err
		}
		if u.Scheme == "" || strings.ContainsAny(v, " \t\r\n") {
			return errors.New("not an absolute URI")
		}
		return nil
	})),
}

// checkCredentials is the AuthenticationFunc: it checks that the request carries
// credentials of the kind the security scheme names, as Prism did. It cannot
// check their values (the document does not know the account), so a wrong token
// passes; the wire fakes (NewTwilio, NewSendGrid) test credentials.
func checkCredentials(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r := in.RequestValidationInput.Request
	sch := in.SecurityScheme
	switch {
	case sch.Type == "http" && strings.EqualFold(sch.Scheme, "basic"):
		if user, pass, ok := r.BasicAuth(); !ok || user == "" || pass == "" {
			return fmt.Errorf("%s: no HTTP Basic credentials (user and password) in Authorization", in.SecuritySchemeName)
		}
	case sch.Type == "http" && strings.EqualFold(sch.Scheme, "bearer"):
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return fmt.Errorf("%s: no Bearer token in Authorization", in.SecuritySchemeName)
		}
	case sch.Type == "apiKey":
		var v string
		switch sch.In {
		case "header":
			v = r.Header.Get(sch.Name)
		case "query":
			v = r.URL.Query().Get(sch.Name)
		case "cookie":
			if c, err := r.Cookie(sch.Name); err == nil {
				v = c.Value
			}
		}
		if v == "" {
			return fmt.Errorf("%s: no API key in %s %q", in.SecuritySchemeName, sch.In, sch.Name)
		}
	}
	return nil
}

// flatten turns kin-openapi's nested errors into one line per violation ("request
// body at /personalizations: property "personalizations" is missing"); security
// counts the lines that are about credentials.
func flatten(err error) (violations []string, security int) {
	var walk func(err error, where string)
	walk = func(err error, where string) {
		prefix := func(s string) string {
			if where == "" {
				return s
			}
			return where + ": " + s
		}
		switch e := err.(type) { //nolint:errorlint // walks kin-openapi's error tree node by node; errors.As would skip levels
		case openapi3.MultiError:
			for _, x := range e {
				walk(x, where)
			}
		case *openapi3filter.SecurityRequirementsError:
			for _, x := range e.Errors {
				violations = append(violations, "security: "+oneLine(x.Error()))
				security++
			}
		case *openapi3filter.RequestError:
			w := where
			switch {
			case e.Parameter != nil:
				w = fmt.Sprintf("%s parameter %q", e.Parameter.In, e.Parameter.Name)
			case e.RequestBody != nil:
				w = "request body"
			}
			switch inner := e.Err.(type) { //nolint:errorlint // the same walk, one level down
			case nil:
				violations = append(violations, w+": "+oneLine(e.Reason))
			case openapi3.MultiError, *openapi3.SchemaError:
				walk(inner, w)
			default:
				msg := inner.Error()
				if e.Reason != "" {
					msg = e.Reason + ": " + msg
				}
				violations = append(violations, w+": "+oneLine(msg))
			}
		case *openapi3.SchemaError:
			reason := e.Reason
			if reason == "" {
				reason = e.Error()
			}
			if ptr := e.JSONPointer(); len(ptr) > 0 {
				reason = "at /" + strings.Join(ptr, "/") + ": " + reason
			}
			violations = append(violations, prefix(oneLine(reason)))
		default:
			violations = append(violations, prefix(oneLine(err.Error())))
		}
	}
	walk(err, "")
	return violations, security
}

// oneLine collapses whitespace runs (kin-openapi's messages span lines) so a
// violation fits a header and a log line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Exchange is one request and response seen by a Capture transport.
type Exchange struct {
	Method, URL string
	ReqHeader   http.Header
	ReqBody     []byte
	Status      int
	RespHeader  http.Header
	RespBody    []byte
}

// Violations returns the ContractServer's ViolationsHeader, or "".
func (e Exchange) Violations() string { return e.RespHeader.Get(ViolationsHeader) }

// Capture is an http.RoundTripper that records every exchange; give the SDK an
// http.Client using it to see exactly what went over the wire.
type Capture struct {
	Base http.RoundTripper
	mu   sync.Mutex
	ex   []Exchange
}

// Client returns an *http.Client that sends through c.
func (c *Capture) Client() *http.Client { return &http.Client{Transport: c, Timeout: 30 * time.Second} }

// RoundTrip implements http.RoundTripper.
func (c *Capture) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	base := c.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	c.mu.Lock()
	c.ex = append(c.ex, Exchange{Method: r.Method, URL: r.URL.String(), ReqHeader: r.Header.Clone(), ReqBody: body,
		Status: resp.StatusCode, RespHeader: resp.Header.Clone(), RespBody: rb})
	c.mu.Unlock()
	return resp, nil
}

// Exchanges returns the recorded exchanges.
func (c *Capture) Exchanges() []Exchange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Exchange(nil), c.ex...)
}

// CheckConforms returns an error unless every exchange got a non-4xx answer without
// violations: the contract-test assertion against a ContractServer.
func (c *Capture) CheckConforms() error {
	ex := c.Exchanges()
	if len(ex) == 0 {
		return errors.New("no request reached the contract server")
	}
	var problems []string
	for _, e := range ex {
		if e.Status >= 400 || e.Violations() != "" {
			problems = append(problems, fmt.Sprintf("%s %s → %d\n  %s: %s\n  response: %s\n  request body: %s",
				e.Method, e.URL, e.Status, ViolationsHeader, e.Violations(), e.RespBody, e.ReqBody))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("requests violate the provider's OpenAPI spec:\n%s", strings.Join(problems, "\n"))
	}
	return nil
}
