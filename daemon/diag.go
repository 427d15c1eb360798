package daemon

import (
	"fmt"
	"io"
	"log/slog"

	"go.yaml.in/yaml/v3"

	"kvmd/diag"
	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/info"
)

// Bundle is kvmd diag's support bundle: the device cfg describes, read as
// serve reads it (the demo's with Demo), made outside the daemon, so that
// it works when the daemon does not. done undoes the demo's set-up.
func Bundle(cfg Config, env Env, identities bool, progress func(diag.Result)) (b *diag.Bundle, done func(), err error) {
	log := slog.New(slog.DiscardHandler)
	// The demo's password line is no part of the bundle's output.
	m, err := openMachine(&cfg, io.Discard, log)
	if err != nil {
		return nil, nil, err
	}
	src := info.New(info.Config{
		FS: m.fs, V4L2: m.v4l2, Mailbox: m.mailbox, MetaPath: cfg.Meta, ExtrasDir: cfg.Extras, Version: env.Version,
	})
	b, err = newBundle(cfg, env, src, m.v4l2, nil, identities, progress)
	if err != nil {
		m.close()
		return nil, nil, err
	}
	return b, m.close, nil
}

// newBundle is a support bundle of the device cfg describes: the same
// root, journal and files as serve, the secrets of its users, 2FA, TLS
// and backend files removed. counts is the daemon's authenticator, nil
// outside the daemon.
func newBundle(cfg Config, env Env, src diag.InfoSource, v4l2 hw.V4L2, counts diag.AuthCounts, identities bool, progress func(diag.Result)) (*diag.Bundle, error) {
	fs := hw.New(cfg.Root)
	host, _ := fs.Hostname()
	r, err := diag.NewRedactor(diag.Secrets{
		Users: cfg.Users,
		Files: []string{cfg.TOTPSecret, cfg.TLSKey, cfg.RADIUSSecretFile, cfg.HTTPAuthSecretFile, cfg.WebRTCICECredentialsFile},
		Names: cfg.AuthLocalUsers,
	}, identities, host)
	if err != nil {
		return nil, err
	}
	settings, err := yaml.Marshal(cfg)
	if err != nil {
		settings = fmt.Appendf(nil, "# cannot encode the configuration: %v\n", err)
	}
	return diag.New(diag.Config{
		FS: fs, Info: src, V4L2: v4l2, Version: env.Version, Settings: settings, Redactor: r, Progress: progress, Auth: counts,
		Journal: diag.Journal{Dir: cfg.JournalDir, Units: cfg.LogUnits},
	}), nil
}

// diagSource serves GET /api/diagnostics from the daemon's own readers,
// with its authenticator's count of failed logins.
func diagSource(cfg Config, env Env, src *info.Source, v4l2 hw.V4L2, counts diag.AuthCounts) httpd.DiagSource {
	return func(identities bool) (httpd.DiagBundle, error) {
		b, err := newBundle(cfg, env, src, v4l2, counts, identities, nil)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}
