'use strict'
// pm.jobEvents(): the job ends of pm.watchJobs() as an EventEmitter, for
// harnesses written around `on('end', …)` rather than `for await`. It reads
// the same native iterator (inotify on the home in a native thread), so no
// polling happens on the JS thread here either.
const { EventEmitter } = require('node:events')

class JobEvents extends EventEmitter {
  constructor(ends) {
    super()
    this._ends = ends
    this._closed = false
    this._pump()
  }

  async _pump() {
    let failure = null
    try {
      for (;;) {
        const { value, done } = await this._ends.next()
        if (done || this._closed) break
        this.emit('end', value)
      }
    } catch (error) {
      failure = error
    }
    const closedByUs = this._closed
    this._closed = true
    // Outside this promise: an 'error' nobody listens for throws, as any
    // EventEmitter's does, instead of becoming an unhandled rejection.
    process.nextTick(() => {
      if (failure && !closedByUs) this.emit('error', failure)
      this.emit('close')
    })
  }

  /** Stops watching; the native thread ends at once, then 'close' is emitted. */
  close() {
    if (this._closed) return
    this._closed = true
    this._ends.return()
  }
}

/** `jobEvents` for a loaded binding (index.js passes its own). */
function jobEventsOf(binding) {
  return function jobEvents(options, ...extra) {
    try {
      return new JobEvents(binding.watchJobs(options, ...extra))
    } catch (error) {
      // The caller called jobEvents: its errors name it, not watchJobs.
      if (error instanceof Error) error.message = error.message.replace(/\bwatchJobs\b/g, 'jobEvents')
      throw error
    }
  }
}

module.exports = { jobEventsOf, JobEvents }
