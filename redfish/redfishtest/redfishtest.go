// Package redfishtest runs the Redfish clients people point at a BMC, as
// Debian packages them, against a daemon in a test: DMTF's redfishtool,
// OpenStack's sushy (python3-sushy, Ironic's client) and Ansible's
// community.general.redfish_command and redfish_info from a playbook
// (ansible). Each is the real program; a test that needs one and lacks it
// ends through testutil.Missing.
package redfishtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

// Target is a daemon to talk to: its address (host:port) over plain HTTP
// or TLS, and a user's credentials. CAFile, when set, is the certificate
// sushy verifies the daemon's with; without it, and for the other
// clients, the certificate is not verified (redfishtool never does;
// Ansible is told not to).
type Target struct {
	Addr           string
	TLS            bool
	User, Password string
	CAFile         string
}

func (tg Target) base() string {
	if tg.TLS {
		return "https://" + tg.Addr
	}
	return "http://" + tg.Addr
}

// timeout bounds one client run.
const timeout = 3 * time.Minute

func run(t *testing.T, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Redfishtool runs redfishtool with args after the target's options
// (Basic authentication unless args say -A Session), and returns what it
// printed.
func Redfishtool(t *testing.T, tg Target, args ...string) (string, error) {
	t.Helper()
	bin := testutil.NeedTool(t, "redfishtool", "redfishtool")
	secure := "Never"
	if tg.TLS {
		secure = "Always"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := append([]string{"-r", tg.Addr, "-u", tg.User, "-p", tg.Password, "-S", secure, "-T", "30"}, args...)
	return run(t, exec.CommandContext(ctx, bin, full...))
}

// python is Debian's own interpreter, whose dist-packages hold sushy and
// Ansible (a python3 first on PATH may be another one).
const python = "/usr/bin/python3"

// Sushy runs script with Debian's python3, sushy importable, and
// KVMD_BASE, KVMD_USER, KVMD_PASSWORD and KVMD_VERIFY (the CA file, empty
// for none: pass verify=os.environ['KVMD_VERIFY'] or False) in its
// environment; it returns what the script printed. The environment's CA
// bundles for requests are dropped: requests would take them over the
// session's verify that sushy sets.
func Sushy(t *testing.T, tg Target, script string) (string, error) {
	t.Helper()
	testutil.NeedTool(t, "python3", python)
	if err := exec.Command(python, "-c", "import sushy").Run(); err != nil {
		testutil.Missing(t, "python3-sushy is not installed (apt-get install python3-sushy, or make deps)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", script)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "CURL_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "KVMD_BASE="+tg.base(), "KVMD_USER="+tg.User, "KVMD_PASSWORD="+tg.Password, "KVMD_VERIFY="+tg.CAFile,
		// urllib3's warning at each request not verified, which buries
		// what the script prints.
		"PYTHONWARNINGS=ignore:Unverified HTTPS request")
	return run(t, cmd)
}

// Playbook runs an Ansible play of tasks against localhost (the modules
// run on this machine and talk to the target), with baseuri, username and
// password as variables, and returns the recap and the JSON of every
// task's result, in order. Ansible's redfish modules speak HTTPS only:
// the target must be TLS.
func Playbook(t *testing.T, tg Target, tasks string) (results []map[string]any, log string, err error) {
	t.Helper()
	bin := testutil.NeedTool(t, "ansible", "ansible-playbook")
	if !tg.TLS {
		t.Fatal("redfishtest: Ansible's redfish modules need an https target")
	}
	dir := t.TempDir()
	play := "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n" + indent(tasks, "    ")
	if err := os.WriteFile(filepath.Join(dir, "play.yml"), []byte(play), 0o600); err != nil {
		t.Fatal(err)
	}
	vars, _ := json.Marshal(map[string]string{"baseuri": tg.Addr, "username": tg.User, "password": tg.Password})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-i", "localhost,", "-e", "@"+filepath.Join(dir, "vars.json"), filepath.Join(dir, "play.yml"))
	if err := os.WriteFile(filepath.Join(dir, "vars.json"), vars, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"ANSIBLE_PYTHON_INTERPRETER="+python, "ANSIBLE_NOCOLOR=1", "ANSIBLE_RETRY_FILES_ENABLED=0",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"), "ANSIBLE_HOME="+filepath.Join(dir, "home"),
		// One JSON object a task: the json callback prints the whole run
		// as one document at its end.
		"ANSIBLE_STDOUT_CALLBACK=json")
	out, err := run(t, cmd)
	var doc struct {
		Plays []struct {
			Tasks []struct {
				Hosts map[string]map[string]any `json:"hosts"`
			} `json:"tasks"`
		} `json:"plays"`
	}
	if i := strings.Index(out, "{"); i >= 0 {
		if jerr := json.Unmarshal([]byte(out[i:]), &doc); jerr == nil {
			for _, p := range doc.Plays {
				for _, task := range p.Tasks {
					results = append(results, task.Hosts["localhost"])
				}
			}
		}
	}
	return results, out, err
}

func indent(s, pfx string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pfx + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
