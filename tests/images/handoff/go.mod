module stevedore.local/handoff

go 1.24
