package mcp

import (
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
)

// The schemas are built once. Input schemas are inferred from the Go
// types, then given the descriptions and bounds inference cannot express.
// Output schemas are written by hand and small: a host lists every tool's
// schemas to the model on each turn, and a client validates structured
// content against them (the TypeScript SDK does), so they name what a
// client acts on — the id, the state, the outcome and exit code, the
// output, what to do next — with its type, and leave the rest of the
// action object (api.md documents it) open.
var (
	execInputSchema = func() *jsonschema.Schema {
		s := mustSchema[ExecInput]()
		one := 1
		s.Properties["target"].MinLength = &one
		s.Properties["command"].MinLength = &one
		s.Properties["timeout_s"].Minimum = new(1.0)
		s.Properties["reason"].MaxLength = new(api.MaxReason)
		s.Properties["wait_s"].Minimum = new(1.0)
		s.Properties["wait_s"].Maximum = new(float64(maxWaitS))
		return s
	}()
	getActionInputSchema = func() *jsonschema.Schema {
		s := mustSchema[GetActionInput]()
		one := 1
		s.Properties["action_id"].MinLength = &one
		s.Properties["wait_s"].Minimum = new(1.0)
		s.Properties["wait_s"].Maximum = new(float64(maxWaitS))
		s.Properties["stream"].Enum = []any{"stdout", "stderr", "stdin"}
		s.Properties["offset"].Minimum = new(0.0)
		s.Properties["limit"].Minimum = new(1.0)
		return s
	}()
	putInputSchema = func() *jsonschema.Schema {
		s := transferSchema[PutInput]()
		s.Properties["mode"].Pattern = "^0?[0-7]{3}$"
		return s
	}()
	getInputSchema = transferSchema[GetInput]()

	// actionSchema is the output of ssh_exec, get_action, ssh_put and
	// ssh_get: an action object (ActionResult, FileResult) or a page of
	// one (PageResult).
	actionSchema = &jsonschema.Schema{
		Type:     "object",
		Required: []string{"id", "state"},
		Properties: map[string]*jsonschema.Schema{
			"id":        {Type: "string"},
			"state":     {Type: "string"},
			"outcome":   {Type: "string", Description: "absent in flight; success is exited with exit_code 0"},
			"exit_code": {Type: "integer"},
			"stdout":    {Type: "string"},
			"stderr":    {Type: "string"},
			"approval":  {Type: "object"},
			"next_step": {Type: "object"},
			"follow":    {Type: "object"},
			"page":      {Type: "object"},
		},
	}
	targetListSchema = &jsonschema.Schema{
		Type:       "object",
		Required:   []string{"targets"},
		Properties: map[string]*jsonschema.Schema{"targets": {Type: "array", Items: &jsonschema.Schema{Type: "object"}}},
	}
	schemaCache = sdk.NewSchemaCache()
)
