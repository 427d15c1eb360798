package main

import (
	"flag"
	"fmt"
	"io"

	"kvmd/firstboot"
)

const firstbootUsage = "usage: kvmd firstboot [--etc DIR] [--state DIR] [--issue FILE] [--hostname NAME] [--group GROUP]"

// firstbootCmd runs "kvmd firstboot": package firstboot provisions the
// device.
func firstbootCmd(args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("kvmd firstboot", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var cfg firstboot.Config
	fset.StringVar(&cfg.Etc, "etc", firstboot.DefaultEtc, "configuration `dir`: kvmd.yaml, htpasswd, totp.secret, tls.crt, tls.key")
	fset.StringVar(&cfg.State, "state", firstboot.DefaultState, "persistent state `dir`: admin-password, secret")
	fset.StringVar(&cfg.Issue, "issue", firstboot.DefaultIssue, "console login banner `file` showing the generated password")
	fset.StringVar(&cfg.Hostname, "hostname", "", "host `name` for the TLS certificate (default: this machine's)")
	fset.StringVar(&cfg.Group, "group", "kvmd", "`group` the daemon runs as: given read access to the secrets it reads, if it exists")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("firstboot: unexpected argument %q\n%s", fset.Arg(0), firstbootUsage)
	}
	return firstboot.Run(cfg, stdout, stderr)
}
