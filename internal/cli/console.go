package cli

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/ops/console"
	"github.com/hookyard/hookyard/pkg/ops/job"
)

// mountConsole adds the operator console (/console/) to the ops API's
// echo. Logins take the same tokens as the API, with the same scopes:
// OPS_TOKEN (every scope) and the config's scoped tokens.
func (e *env) mountConsole(ops *echo.Echo, jobs *job.Runner, auth *api.Authenticator) {
	var scopes []console.Scope
	seen := map[console.Scope]bool{}
	for _, ep := range e.cfg.Endpoints {
		s := console.Scope{Provider: ep.Provider, SourceAccount: ep.SourceAccount, Environment: ep.Environment}
		if !seen[s] {
			seen[s] = true
			scopes = append(scopes, s)
		}
	}
	_, err := console.Mount(ops, e.pool, e.log, console.Config{Auth: consoleAuth(auth),
		Jobs: jobs, Scopes: scopes, Policy: e.cfg.Access, ActionsWaiting: actionsWaiting(e.cfg),
		Brokers: brokers(e.cfg), Topic: e.cfg.Kafka.Topic, Group: e.cfg.Kafka.Group})
	if err != nil {
		// Only a broken build gets here (the templates are embedded); the
		// API itself still serves.
		e.log.Error("console not mounted", slog.String("error", err.Error()))
		return
	}
	e.log.Info("operator console", slog.String("url", "http://"+e.cfg.OpsAddr+"/console/"))
}

// consoleAuth is the ops API's authenticator as the console asks for it:
// a token's principal, with the scopes the API gives it.
func consoleAuth(auth *api.Authenticator) console.Authenticator {
	return console.AuthenticatorFunc(func(token string) (console.Principal, bool) {
		p, err := auth.AuthenticateToken(token)
		if err != nil {
			return console.Principal{}, false
		}
		var scopes console.Scopes
		for _, s := range []api.Scope{api.ScopeAccess, api.ScopeRead, api.ScopePayload, api.ScopeOperate} {
			if p.Has(s) {
				scopes = append(scopes, string(s))
			}
		}
		return console.Principal{Name: p.Name, Scopes: scopes}, true
	})
}
