"""`forkflow replay`: what forkflow would have done, step by step, over a fork's own history."""
