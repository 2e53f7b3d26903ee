package client

// The types of every request and answer are generated from the API document by
// oapi-codegen (pinned here; go run fetches it through the module proxy and builds
// it against its own go.mod, so the generator adds nothing to Herald's). Run
// `go generate ./client/` after changing api/openapi.yaml; TestGeneratedTypesAreCurrent
// fails until types.gen.go matches the document.
//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../api/openapi.yaml
