"""The queue's rules: work coming in (enqueue, results), the loop that hands it out, recovery."""
