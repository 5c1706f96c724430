package action

// ClaimSQL is the claim statement, for its plan test.
const ClaimSQL = claimSQL

// ClaimOrderedSQL is the ordered claim statement, for its plan test.
const ClaimOrderedSQL = claimOrderedSQL

// ForgetDeliveriesSQL is one batch of the deliveries' retention, for its
// benchmark.
const ForgetDeliveriesSQL = forgetDeliveriesSQL
