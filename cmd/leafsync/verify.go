package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leafsync/leafsync/internal/syncer/verify/canary"
)

// verifyEnv is what `leafsync verify` looks at inside its pod.
type verifyEnv struct {
	// apiServer is host:port of the kubernetes Service, as the kubelet
	// gives it to every container ("" outside a pod).
	apiServer string
	// saDir holds the mounted ServiceAccount token and CA, if any.
	saDir string
	// resolvConf is the pod's /etc/resolv.conf.
	resolvConf string
	resolver   interface {
		LookupHost(ctx context.Context, host string) ([]string, error)
	}
	// timeout bounds each check.
	timeout time.Duration
}

func newVerifyCommand() *cobra.Command {
	terminationLog := "/dev/termination-log"
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check from inside a pod that the cluster's API server answers and cluster DNS resolves",
		Long: `verify is what leafsync's canary pod runs in a member cluster (see
docs/verification.md). It checks that the cluster's API server answers
(GET /version, with the pod's ServiceAccount token when one is mounted,
anonymously otherwise) and that cluster DNS resolves kubernetes.default
(skipped, never failed, when the pod has no cluster DNS). It prints one JSON
line of results, writes it to the termination log, and exits 0 when every
check passed or was skipped, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := verifyEnv{
				saDir:      "/var/run/secrets/kubernetes.io/serviceaccount",
				resolvConf: "/etc/resolv.conf",
				resolver:   net.DefaultResolver,
				timeout:    10 * time.Second,
			}
			if host := os.Getenv("KUBERNETES_SERVICE_HOST"); host != "" {
				env.apiServer = net.JoinHostPort(host, os.Getenv("KUBERNETES_SERVICE_PORT"))
			}
			return runVerify(cmd.Context(), env, cmd.OutOrStdout(), terminationLog)
		},
	}
	cmd.Flags().StringVar(&terminationLog, "termination-log", terminationLog, "file to write the result to as well, if it exists (the container's terminationMessagePath)")
	return cmd
}

// errVerifyFailed makes the command exit 1; the JSON line says why.
var errVerifyFailed = errors.New("verification failed")

func runVerify(ctx context.Context, env verifyEnv, out io.Writer, terminationLog string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	report := canary.NewReport(env.checkAPI(ctx), env.checkDNS(ctx))
	var line bytes.Buffer // one line, with "<" and ">" as they are
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(report); err != nil {
		return err
	}
	if _, err := out.Write(line.Bytes()); err != nil {
		return err
	}
	// Only into a file the kubelet mounted: never create one outside a pod.
	if f, err := os.OpenFile(terminationLog, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
		_, _ = f.Write(line.Bytes())
		_ = f.Close()
	}
	if !report.Passed {
		return errVerifyFailed
	}
	return nil
}

// checkAPI asks the API server for /version: with the pod's own token
// when one is mounted (it proves the member accepts its pods' identities),
// anonymously otherwise (any HTTP answer then shows it is reachable).
func (e verifyEnv) checkAPI(ctx context.Context) canary.Check {
	check := canary.Check{Name: canary.CheckAPI, Outcome: canary.OutcomeFailed}
	if e.apiServer == "" {
		check.Detail = "KUBERNETES_SERVICE_HOST is not set: not running in a pod"
		return check
	}
	token, _ := os.ReadFile(filepath.Join(e.saDir, "token"))
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	how := "with the pod's ServiceAccount token"
	if len(token) == 0 {
		how = "anonymously (no ServiceAccount token mounted)"
	}
	if ca, err := os.ReadFile(filepath.Join(e.saDir, "ca.crt")); err == nil {
		tlsConfig.RootCAs = x509.NewCertPool()
		tlsConfig.RootCAs.AppendCertsFromPEM(ca)
	} else {
		// Nothing secret is sent without a token: reachability is all
		// that is asked, so an unverified certificate will do.
		tlsConfig.InsecureSkipVerify = true
		how += ", server certificate not verified (no CA mounted)"
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+e.apiServer+"/version", nil)
	if err != nil {
		check.Detail = err.Error()
		return check
	}
	if len(token) > 0 {
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := client.Do(req)
	if err != nil {
		check.Detail = fmt.Sprintf("GET /version %s: %v", how, err)
		return check
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var version struct {
		GitVersion string `json:"gitVersion"`
	}
	switch {
	case resp.StatusCode == http.StatusOK && json.Unmarshal(body, &version) == nil:
		check.Outcome = canary.OutcomePassed
		check.Detail = fmt.Sprintf("GET https://%s/version %s: %s", e.apiServer, how, version.GitVersion)
	case len(token) == 0 && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
		check.Outcome = canary.OutcomePassed
		check.Detail = fmt.Sprintf("GET https://%s/version %s: answered %s (anonymous requests refused), so it is reachable", e.apiServer, how, resp.Status)
	default:
		check.Detail = fmt.Sprintf("GET https://%s/version %s: %s: %s", e.apiServer, how, resp.Status, truncateDetail(string(body)))
	}
	return check
}

// checkDNS resolves kubernetes.default through the pod's search domains.
// A pod without cluster DNS (no svc.<domain> search domain: the member's
// kubelet has no clusterDNS) skips it, and says so.
func (e verifyEnv) checkDNS(ctx context.Context) canary.Check {
	check := canary.Check{Name: canary.CheckDNS, Outcome: canary.OutcomeSkipped}
	domain, err := clusterSearchDomain(e.resolvConf)
	switch {
	case err != nil:
		check.Detail = fmt.Sprintf("skipped: no cluster DNS (cannot read %s: %v)", e.resolvConf, err)
		return check
	case domain == "":
		check.Detail = fmt.Sprintf("skipped: no cluster DNS (%s has no cluster search domain svc.<domain>: the member's kubelet sets no clusterDNS)", e.resolvConf)
		return check
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	addrs, err := e.resolver.LookupHost(ctx, "kubernetes.default")
	if err != nil {
		check.Outcome = canary.OutcomeFailed
		check.Detail = fmt.Sprintf("resolving kubernetes.default (search domain %s): %s", domain, truncateDetail(err.Error()))
		return check
	}
	check.Outcome = canary.OutcomePassed
	check.Detail = fmt.Sprintf("kubernetes.default (search domain %s) is %s", domain, strings.Join(addrs, ", "))
	return check
}

// clusterSearchDomain is the pod's svc.<cluster domain> search domain, ""
// if it has none.
func clusterSearchDomain(resolvConf string) (string, error) {
	f, err := os.Open(resolvConf)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 || fields[0] != "search" {
			continue
		}
		for _, d := range fields[1:] {
			if strings.HasPrefix(d, "svc.") {
				return d, nil
			}
		}
	}
	return "", s.Err()
}

// truncateDetail keeps a detail short: the termination message holds 4 KiB.
func truncateDetail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
