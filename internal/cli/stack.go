package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/deploy"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// stackFlags are deploy's flags for the CloudFormation paths: --emit
// cloudformation prints the template, --stack NAME creates or updates a
// stack of it. One flag per template parameter (--billing-mode, ...).
type stackFlags struct {
	emit, stack      string
	region, endpoint string
	wait             time.Duration
	namespaceIDs     []string
	eventsRules      string // the rules file of the events function
	eventsNamespace  string
	params           []deploy.TemplateParameter
	values           map[string]*string // by flag
	paramsErr        error              // why the template's parameters could not be read
}

// maxTemplateBody is the largest template CreateStack takes inline.
const maxTemplateBody = 51200

func addStackFlags(cmd *cobra.Command, f *stackFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.emit, "emit", "", `print an artefact instead of creating the table: "cloudformation" (the template, with the parameter flags below as defaults)`)
	fl.StringVar(&f.stack, "stack", "", "create or update the CloudFormation stack NAME of the template (AWS credentials; docs/operations.md)")
	fl.StringVar(&f.region, "region", "", "--stack: the AWS region (default: AWS_REGION, the profile's)")
	fl.StringVar(&f.endpoint, "cloudformation-endpoint", "", "--stack: a CloudFormation endpoint URL other than AWS's")
	fl.DurationVar(&f.wait, "stack-timeout", 45*time.Minute, "--stack: how long to wait for the stack")
	fl.StringSliceVar(&f.namespaceIDs, "namespace-id", nil, "--emit/--stack: add the acquire and admin managed policies confined to this namespace id (repeat, or comma-separate)")
	fl.StringVar(&f.eventsRules, "events-rules", "", "--emit/--stack: add the events function with this rules file (package events; docs/operations.md) and an EventBridge rule per source and detail-type it matches")
	fl.StringVar(&f.eventsNamespace, "events-namespace", "", "--events-rules: the namespace whose reservations the events function releases (default: the default namespace)")
	params, err := deploy.TemplateParameters()
	// The embedded template is checked by package deploy's tests; should it
	// be unreadable all the same, --emit and --stack say so (cloudFormation).
	f.params, f.values, f.paramsErr = params, map[string]*string{}, err
	for _, p := range params {
		def := p.Default
		if p.Required {
			def = "required with --stack"
		}
		f.values[p.Flag] = fl.String(p.Flag, "", "template parameter "+p.Name+": "+p.Description+" (default "+quoteEmpty(def)+")")
	}
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// cloudFormation reports whether the command takes a CloudFormation path,
// and refuses flags that belong to another.
func (f *stackFlags) cloudFormation(cmd *cobra.Command) (bool, error) {
	changed := cmd.Flags().Changed
	if f.emit != "" && f.stack != "" {
		return false, usagef("--emit and --stack: choose one")
	}
	if changed("emit") && f.emit != "cloudformation" {
		return false, usagef("--emit %q: the only artefact is cloudformation", f.emit)
	}
	if changed("stack") && !validStackName(f.stack) {
		return false, usagef("--stack %q: a stack name is a letter then letters, digits and '-', at most 128", f.stack)
	}
	on := f.emit != "" || f.stack != ""
	if on && f.paramsErr != nil {
		return false, fmt.Errorf("the embedded CloudFormation template: %w", f.paramsErr)
	}
	if on && changed("store") {
		return false, usagef("--store: --emit and --stack take the table's name from --table-name")
	}
	for _, name := range []string{"region", "cloudformation-endpoint", "stack-timeout"} {
		if changed(name) && f.stack == "" {
			return false, usagef("--%s applies to --stack only", name)
		}
	}
	if !on {
		for _, name := range append(f.flagNames(), "namespace-id", "events-rules", "events-namespace") {
			if changed(name) {
				return false, usagef("--%s applies to --emit cloudformation and --stack", name)
			}
		}
	}
	return on, nil
}

func (f *stackFlags) flagNames() []string {
	out := make([]string, len(f.params))
	for i, p := range f.params {
		out[i] = p.Flag
	}
	return out
}

func validStackName(s string) bool {
	if s == "" || len(s) > 128 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// template makes the template of the flags given.
func (f *stackFlags) template(cmd *cobra.Command) ([]byte, error) {
	opts := deploy.TemplateOptions{Parameters: map[string]string{}, NamespaceIDs: f.namespaceIDs, EventsNamespace: f.eventsNamespace}
	if f.eventsRules != "" {
		cfg, err := loadEventRules(f.eventsRules)
		if err != nil {
			return nil, err
		}
		opts.EventRules = cfg
	}
	for _, p := range f.params {
		if cmd.Flags().Changed(p.Flag) {
			opts.Parameters[p.Name] = *f.values[p.Flag]
		} else if p.Required && f.stack != "" {
			return nil, usagef("--%s is required with --stack (template parameter %s: %s)", p.Flag, p.Name, p.Description)
		}
	}
	b, err := deploy.Template(opts)
	var ie *deploy.InvalidOptionError
	if errors.As(err, &ie) {
		return nil, usageError{err}
	}
	return b, err
}

// loadEventRules reads the events function's rules file: a bad one is a
// usage error naming the flag.
func loadEventRules(path string) (*events.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--events-rules: %v", err)
	}
	defer f.Close()
	cfg, err := events.LoadConfig(f)
	if err != nil {
		return nil, usagef("--events-rules %s: %v", path, err)
	}
	return cfg, nil
}

// runCloudFormation runs --emit or --stack.
func (f *stackFlags) runCloudFormation(cmd *cobra.Command, g *globals) error {
	tpl, err := f.template(cmd)
	if err != nil {
		return err
	}
	if f.emit != "" {
		_, err := g.stdout.Write(tpl)
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.wait)
	defer cancel()
	return f.deployStack(ctx, g, tpl)
}

// deployStack creates or updates the stack, waits for it, prints its
// outputs, and initialises the table (schema version record, as tollgate
// deploy does): CloudFormation cannot write items.
func (f *stackFlags) deployStack(ctx context.Context, g *globals, tpl []byte) error {
	var body bytes.Buffer
	if err := json.Compact(&body, tpl); err != nil {
		return err
	}
	if body.Len() > maxTemplateBody {
		return usagef("--namespace-id, --events-rules: the template (%d bytes) is over CloudFormation's inline limit of %d; "+
			"use --emit cloudformation and aws cloudformation deploy --s3-bucket, or attach fewer tenant policies or events rules per stack", body.Len(), maxTemplateBody)
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(f.region))
	if err != nil {
		return fmt.Errorf("--stack %s: AWS configuration: %w", f.stack, err)
	}
	if cfg.Region == "" {
		return usagef("--stack %s: no AWS region: set --region or AWS_REGION", f.stack)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return fmt.Errorf("--stack %s: no AWS credentials (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"or run where a role is available); or use --emit cloudformation: %w", f.stack, err)
	}
	cf := cloudformation.NewFromConfig(cfg, func(o *cloudformation.Options) {
		if f.endpoint != "" {
			o.BaseEndpoint = aws.String(f.endpoint)
		}
	})
	name := aws.String(f.stack)
	caps := []cfntypes.Capability{cfntypes.CapabilityCapabilityIam}
	_, err = cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: name})
	switch {
	case err != nil && strings.Contains(err.Error(), "does not exist"):
		fmt.Fprintf(g.stderr, "creating stack %s in %s...\n", f.stack, cfg.Region)
		if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: name, TemplateBody: aws.String(body.String()),
			Capabilities: caps, Tags: []cfntypes.Tag{{Key: aws.String("tollgate"), Value: aws.String("stack")}}}); err != nil {
			return fmt.Errorf("--stack %s: create: %w", f.stack, err)
		}
		err = cloudformation.NewStackCreateCompleteWaiter(cf).Wait(ctx, &cloudformation.DescribeStacksInput{StackName: name}, f.wait)
	case err != nil:
		return fmt.Errorf("--stack %s: %w", f.stack, err)
	default:
		fmt.Fprintf(g.stderr, "updating stack %s in %s...\n", f.stack, cfg.Region)
		_, err = cf.UpdateStack(ctx, &cloudformation.UpdateStackInput{StackName: name, TemplateBody: aws.String(body.String()), Capabilities: caps})
		if err != nil && strings.Contains(err.Error(), "No updates are to be performed") {
			fmt.Fprintf(g.stderr, "stack %s is up to date\n", f.stack)
			err = nil
		} else if err == nil {
			err = cloudformation.NewStackUpdateCompleteWaiter(cf).Wait(ctx, &cloudformation.DescribeStacksInput{StackName: name}, f.wait)
		}
	}
	if err != nil {
		return fmt.Errorf("--stack %s: %w (see the stack's events: aws cloudformation describe-stack-events --stack-name %s)", f.stack, err, f.stack)
	}
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: name})
	if err != nil || len(out.Stacks) == 0 {
		return fmt.Errorf("--stack %s: describe: %w", f.stack, err)
	}
	outputs := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	st, err := dynamodb.Connect(ctx, dynamodb.ConnectConfig{Table: outputs["TableName"], Region: cfg.Region})
	if err == nil {
		err = st.Admin().InitTable(ctx) // the stack made the table: checks it, writes the schema version
	}
	if err != nil {
		return fmt.Errorf("--stack %s: initialise table %s: %w", f.stack, outputs["TableName"], err)
	}
	return g.printOut(outputs, func(w *tabwriter.Writer) {
		row(w, "OUTPUT", "VALUE")
		for _, k := range sortedKeys(outputs) {
			row(w, k, outputs[k])
		}
	})
}
