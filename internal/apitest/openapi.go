package apitest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/herald-notify/herald/api"
)

// openAPISpec is api/openapi.yaml, loaded, validated and routed once per test binary.
type openAPISpec struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	specOnce sync.Once
	spec     *openAPISpec
	specErr  error
)

// loadOpenAPI parses and validates the embedded document and builds a router over it.
func loadOpenAPI() (*openAPISpec, error) {
	specOnce.Do(func() {
		// The non-JSON answers: the inbox stream, the component and its demo page,
		// the TwiML of Twilio's inbound webhook.
		for _, ct := range []string{"text/event-stream", "text/javascript", "text/html", "text/xml"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
		}
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.OpenAPIDocument)
		if err != nil {
			specErr = fmt.Errorf("parse api/openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			specErr = fmt.Errorf("api/openapi.yaml is not a valid OpenAPI document: %w", err)
			return
		}
		// Routes are matched by method and path only: the document's servers name the
		// default listen address, never the test server's random port, and with no
		// servers the gorillamux router matches any scheme and host. This doc instance
		// is private to the checker, so clearing its servers is safe.
		doc.Servers = nil
		router, err := gorillamux.NewRouter(doc)
		if err != nil {
			specErr = fmt.Errorf("route api/openapi.yaml: %w", err)
			return
		}
		spec = &openAPISpec{doc: doc, router: router}
	})
	return spec, specErr
}

// checkAgainstOpenAPI validates one live response against api/openapi.yaml. It reports
// (with t.Errorf, so the test goes on) a route the document does not describe, a status
// code the operation does not list, and a header or body that does not match.
//
// Two answers come from the router rather than from an operation, and are checked
// against the document's shared components instead:
//   - a path the document does not list may answer 404 (components.responses.NotFound);
//   - a listed path called with a method it does not define may answer 405
//     (components.responses.MethodNotAllowed, which requires the Allow header).
func checkAgainstOpenAPI(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	s, err := loadOpenAPI()
	if err != nil {
		t.Errorf("OpenAPI: %v", err)
		return
	}
	// After a followed redirect the response belongs to the last request.
	if resp.Request != nil && resp.Request.URL != nil {
		req = resp.Request
	}
	if err := s.validate(req, resp, body); err != nil {
		t.Errorf("OpenAPI: %s %s answered %d, which api/openapi.yaml does not allow: %v\nbody: %s",
			req.Method, req.URL.RequestURI(), resp.StatusCode, err, truncateBody(body, 500))
	}
}

// validate returns why the response does not match the document, or nil.
func (s *openAPISpec) validate(req *http.Request, resp *http.Response, body []byte) error {
	route, params, err := s.findRoute(req)
	if err != nil {
		switch {
		case errors.Is(err, routers.ErrPathNotFound):
			if isRedirect(resp.StatusCode) {
				return s.checkTrailingSlashRedirect(req, resp)
			}
			if resp.StatusCode != http.StatusNotFound {
				return fmt.Errorf("the path is not in the document (only a 404 may answer an undocumented path)")
			}
			route, err = s.sharedResponseRoute(req, http.StatusNotFound, "NotFound")
		case errors.Is(err, routers.ErrMethodNotAllowed):
			if resp.StatusCode != http.StatusMethodNotAllowed {
				return fmt.Errorf("the path is in the document but not with method %s (only a 405 may answer it)", req.Method)
			}
			route, err = s.sharedResponseRoute(req, http.StatusMethodNotAllowed, "MethodNotAllowed")
		default:
			return fmt.Errorf("finding the route: %w", err)
		}
		if err != nil {
			return err
		}
		params = map[string]string{}
	}

	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: params,
			Route:      route,
			Options: &openapi3filter.Options{
				AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
				ExcludeRequestBody: true,
			},
		},
		Status: resp.StatusCode,
		Header: resp.Header,
		Options: &openapi3filter.Options{
			// Without this an undocumented status code passes silently.
			IncludeResponseStatus: true,
			MultiError:            true,
			// Name the JSON pointer and the rule, not the whole schema and value: the
			// body is printed (truncated) next to the error anyway.
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
		},
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// findRoute routes req by method and path as gin does: on the decoded URL path, so
// an escaped '/' inside a path parameter splits segments for both.
func (s *openAPISpec) findRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	r := req.Clone(context.Background())
	u := *req.URL
	u.RawPath = ""
	r.URL = &u
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		var re *routers.RouteError
		if errors.As(err, &re) {
			switch re.Reason {
			case routers.ErrPathNotFound.Error():
				err = routers.ErrPathNotFound
			case routers.ErrMethodNotAllowed.Error():
				err = routers.ErrMethodNotAllowed
			}
		}
		return nil, nil, err
	}
	route.Path = req.URL.Path // report what was called
	return route, params, nil
}

func isRedirect(status int) bool {
	return status == http.StatusMovedPermanently || status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect
}

// checkTrailingSlashRedirect accepts gin's RedirectTrailingSlash answer: a path the
// document lists, but with a trailing slash, redirected to the listed path.
func (s *openAPISpec) checkTrailingSlashRedirect(req *http.Request, resp *http.Response) error {
	trimmed := strings.TrimSuffix(req.URL.Path, "/")
	if trimmed == req.URL.Path || trimmed == "" {
		return fmt.Errorf("the path is not in the document (a %d may only redirect a documented path with a trailing slash)", resp.StatusCode)
	}
	r := req.Clone(context.Background())
	u := *req.URL
	u.Path, u.RawPath = trimmed, ""
	r.URL = &u
	if _, _, err := s.findRoute(r); err != nil {
		return fmt.Errorf("the path is not in the document, nor is it without its trailing slash (%w)", err)
	}
	if loc := resp.Header.Get("Location"); loc == "" || !strings.HasSuffix(strings.SplitN(loc, "?", 2)[0], trimmed) {
		return fmt.Errorf("a trailing-slash redirect must point at %s, Location is %q", trimmed, loc)
	}
	return nil
}

// sharedResponseRoute is a synthetic route whose only response is the named
// components.responses entry, for answers gin gives outside any operation.
func (s *openAPISpec) sharedResponseRoute(req *http.Request, status int, name string) (*routers.Route, error) {
	var ref *openapi3.ResponseRef
	if s.doc.Components != nil {
		ref = s.doc.Components.Responses[name]
	}
	if ref == nil || ref.Value == nil {
		return nil, fmt.Errorf("the document has no components.responses.%s to check a %d against", name, status)
	}
	op := openapi3.NewOperation()
	op.Responses = openapi3.NewResponses(openapi3.WithStatus(status, ref))
	return &routers.Route{
		Spec:      s.doc,
		Path:      req.URL.Path,
		Method:    req.Method,
		Operation: op,
	}, nil
}

func truncateBody(body []byte, max int) string {
	if len(body) == 0 {
		return "(empty)"
	}
	if len(body) <= max {
		return string(body)
	}
	return fmt.Sprintf("%s… (%d bytes in all)", body[:max], len(body))
}
