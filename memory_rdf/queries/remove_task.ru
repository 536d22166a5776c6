# remove_task — take one task out of the durable journal (SPEC §5.1): in the write that
# lands its memory, or before the task is written back with a new status.
# Inputs:  $task     the task's IRI
#          $journal  the journal graph (embedded: <https://w3id.org/memory-rdf/graph/journal>)
# Output:  none (an update)
DELETE { GRAPH $journal { $task ?p ?o } } WHERE { GRAPH $journal { $task ?p ?o } }
