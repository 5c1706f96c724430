package action

import (
	"errors"
	"strings"
	"time"
)

// Statuses of an action.
const (
	StatusPending   = "pending"
	StatusSending   = "sending"
	StatusSent      = "sent"
	StatusFailed    = "failed"
	StatusAmbiguous = "ambiguous"
	StatusDead      = "dead"
	// StatusSkipped is final, like sent: an operator gave a dead action
	// up (Skip). It is never sent, and it no longer holds back the later
	// actions of its stream.
	StatusSkipped = "skipped"
)

// KindReceipt is the receipt of a paid invoice; its subject is the invoice
// id and its fact the invoice_paid fact of that id (DefaultEffects).
const KindReceipt = "receipt"

// Sentinel errors.
var (
	// ErrNotFound: no action has that key.
	ErrNotFound = errors.New("no such action")
	// ErrNotDead: the action exists but is not dead, so a replay left it
	// alone. A sent action is never sent again.
	ErrNotDead = errors.New("action is not dead")
)

// Key is an action's identity: the row's primary key.
type Key struct {
	Provider      string `json:"provider"`
	SourceAccount string `json:"source_account"`
	Environment   string `json:"environment"`
	SubjectID     string `json:"subject_id"`
	Kind          string `json:"kind"`
}

var keyEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

// String is the action's stable key, the Idempotency-Key of every attempt:
// hookyard:<provider>:<account>:<environment>:<subject>:<kind>, each part
// with "%" and ":" percent-encoded so two identities never share a key.
func (k Key) String() string {
	parts := []string{"hookyard", k.Provider, k.SourceAccount, k.Environment, k.SubjectID, k.Kind}
	for i := 1; i < len(parts); i++ {
		parts[i] = keyEscaper.Replace(parts[i])
	}
	return strings.Join(parts, ":")
}

// Action is one action row as operators see it.
type Action struct {
	Key
	// IdempotencyKey is Key.String(): what the receiving server sees.
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	// Attempts counts attempts started, replays included.
	Attempts int `json:"attempts"`
	// NextAttemptAt is the next attempt of a pending, failed or ambiguous
	// action, and the end of the lease of a sending one.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	EventID       string     `json:"event_id"`
	CreatedAt     time.Time  `json:"created_at"`
	// DoneAt is when it was sent, went dead or was skipped.
	DoneAt *time.Time `json:"done_at,omitempty"`
	// ClaimedBy is the sender of the latest attempt.
	ClaimedBy string `json:"claimed_by,omitempty"`
}
