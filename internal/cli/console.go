package cli

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/ops/console"
	"github.com/hookyard/hookyard/pkg/ops/job"
)

// mountConsole adds the operator console (/console/) to the ops API's
// echo. Logins take the ops token (every scope); the scoped tokens plug in
// as the console's Authenticator.
func (e *env) mountConsole(ops *echo.Echo, jobs *job.Runner) {
	var scopes []console.Scope
	seen := map[console.Scope]bool{}
	for _, ep := range e.cfg.Endpoints {
		s := console.Scope{Provider: ep.Provider, SourceAccount: ep.SourceAccount, Environment: ep.Environment}
		if !seen[s] {
			seen[s] = true
			scopes = append(scopes, s)
		}
	}
	_, err := console.Mount(ops, e.pool, e.log, console.Config{Auth: console.TokenAuthenticator{Token: e.cfg.OpsToken},
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
