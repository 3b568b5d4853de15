// SPDX-License-Identifier: MIT
// paddock's JavaScript harness: a persistent node `vm` context driven over fd 3.
//
// The sandbox's init starts it, unprivileged, in /workspace, as
//
//     /usr/bin/node /opt/paddock/harness.js
//
// fd 0 is /dev/null; fd 1 and 2 are pipes read by sessiond; fd 3 is the control
// socket. The protocol is the one harness.py speaks (docs/harness-protocol.md):
// one JSON request line in, {"code", "mode"}, one JSON reply line out,
// {"status", "return_code", "result", "error"}. User output never goes to fd 3.
//
// Cells run in one vm context that lives as long as the process, so what a cell
// defines the next one sees. The completion value of a cell is its result, shown
// with util.inspect; a promise is awaited first. A SIGINT (the daemon's timeout)
// stops a running cell and keeps the context.
'use strict';

const net = require('net');
const path = require('path');
const util = require('util');
const vm = require('vm');
const Module = require('module');

const CTL_FD = 3;
// Code is capped at 32 MiB by the API; JSON escaping grows a byte to at most six.
const MAX_REQUEST_BYTES = 6 * (32 << 20) + 4096;
const INSPECT = { depth: 4, colors: false, maxArrayLength: 100, maxStringLength: 10000 };

// Globals of the main context that user code expects to find in its own.
const SHARED_GLOBALS = [
	'console', 'process', 'Buffer', 'URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder',
	'AbortController', 'AbortSignal', 'Event', 'EventTarget', 'structuredClone', 'atob',
	'btoa', 'fetch', 'Headers', 'Request', 'Response', 'FormData', 'Blob', 'performance',
	'queueMicrotask', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval',
	'setImmediate', 'clearImmediate', 'crypto', 'BroadcastChannel', 'MessageChannel',
	'MessagePort', 'MessageEvent',
];

let cellCount = 0;
let running = false;          // a cell runs: SIGINT interrupts it
let interruptWait = null;     // rejects the promise a cell's result is awaited on
let cwdApplied = false;

function makeContext() {
	const where = path.join(process.cwd(), '[cell]');
	const sandbox = {};
	for (const name of SHARED_GLOBALS)
		if (name in globalThis)
			sandbox[name] = globalThis[name];
	sandbox.require = Module.createRequire(where);
	sandbox.module = { exports: {} };
	sandbox.exports = sandbox.module.exports;
	sandbox.__filename = where;
	sandbox.__dirname = process.cwd();
	const context = vm.createContext(sandbox, { name: 'paddock' });
	// `global` as in a node module; the context's own globalThis is the sandbox.
	vm.runInContext('var global = globalThis;', context);
	return context;
}

const context = makeContext();

// ------------------------------------------------------------------ errors

function isErrorLike(e) {
	return e !== null && typeof e === 'object' && typeof e.stack === 'string';
}

// The stack without the harness's own frames and node's internals.
function userStack(stack) {
	return stack.split('\n').filter((line) => !(
		line.includes(__filename) || line.includes('(node:') || /^\s+at node:/.test(line)));
}

function errorObject(e) {
	if (isErrorLike(e)) {
		let ename = typeof e.name === 'string' && e.name ? e.name : 'Error';
		if (e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED')
			ename = 'KeyboardInterrupt';
		return {
			ename,
			evalue: typeof e.message === 'string' ? e.message : String(e.message),
			traceback: userStack(e.stack),
		};
	}
	// `throw 5`, `throw {a: 1}`: what node prints for an uncaught value.
	const shown = util.inspect(e, INSPECT);
	return { ename: 'Uncaught', evalue: shown, traceback: [`Uncaught ${shown}`] };
}

function interruption() {
	const e = new Error('Script execution was interrupted by `SIGINT`');
	e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
	return e;
}

// ------------------------------------------------------------------ running cells

function isThenable(v) {
	return v !== null && (typeof v === 'object' || typeof v === 'function') &&
		typeof v.then === 'function';
}

// Simple top-level declarations (`const name = ...` at the start of a line) of an async
// cell become properties of the context, so later cells still see them.
function hoistDeclarations(code) {
	return code.replace(/^(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=(?!=)/gm, 'globalThis.$1 =');
}

// The body of an async function for a cell with a top-level await. When its last line is
// an expression, the function returns it, so the cell keeps its completion value.
function asyncScript(code, filename) {
	const lines = hoistDeclarations(code).replace(/\s+$/, '').split('\n');
	const last = lines.pop().replace(/;\s*$/, '');
	const body = lines.join('\n');
	try {
		// A declaration has no value, even when it became an assignment.
		if (/^(?:const|let|var)\s/.test(code.replace(/\s+$/, '').split('\n').pop()))
			throw new SyntaxError('a declaration');
		return new vm.Script(`(async () => {\n${body}\nreturn (${last}\n);\n})()`,
			{ filename, lineOffset: -1 });
	} catch (e) {
		return new vm.Script(`(async () => {\n${hoistDeclarations(code)}\n})()`,
			{ filename, lineOffset: -1 });
	}
}

// Compile a cell; a top-level await makes it the body of an async function.
function compile(code, filename) {
	try {
		return new vm.Script(code, { filename });
	} catch (e) {
		if (!(isErrorLike(e) && e.name === 'SyntaxError' && /\bawait\b/.test(code)))
			throw e;
		return asyncScript(code, filename);
	}
}

// Wait for a promise the cell produced; a SIGINT ends the wait.
function settle(value) {
	if (!isThenable(value))
		return Promise.resolve(value);
	return new Promise((resolve, reject) => {
		interruptWait = reject;
		Promise.resolve(value).then(resolve, reject);
	}).finally(() => { interruptWait = null; });
}

async function runCell(code, cell) {
	cellCount += 1;
	const filename = `cell-${cellCount}`;
	let value;
	running = true;
	try {
		const script = compile(code, filename);
		value = script.runInContext(context, { breakOnSigint: true, displayErrors: false });
		value = await settle(value);
	} catch (e) {
		running = false;
		const error = errorObject(e);
		if (!cell)
			process.stderr.write(error.traceback.join('\n') + '\n');
		const interrupted = error.ename === 'KeyboardInterrupt';
		return reply('error', interrupted ? 130 : 1, null, error);
	}
	running = false;
	let result = null;
	if (cell && value !== undefined)
		result = { 'text/plain': util.inspect(value, INSPECT) };
	return reply('ok', 0, result, null);
}

function reply(status, returnCode, result, error) {
	return { status, return_code: returnCode, result, error };
}

function protocolError(message) {
	return reply('error', 1, null,
		{ ename: 'ProtocolError', evalue: message, traceback: [`ProtocolError: ${message}`] });
}

async function handle(line) {
	let request;
	try {
		request = JSON.parse(line);
	} catch (e) {
		return protocolError(`invalid JSON: ${e.message}`);
	}
	if (request === null || typeof request !== 'object' || Array.isArray(request))
		return protocolError('a request is a JSON object');
	const mode = request.mode === undefined ? 'otari' : request.mode;
	if (typeof request.code !== 'string')
		return protocolError("'code' must be a string");
	if (mode !== 'otari' && mode !== 'cell')
		return protocolError("'mode' must be 'otari' or 'cell'");
	const id = request.id;
	if (id !== undefined && id !== null && typeof id !== 'string' && !Number.isInteger(id))
		return protocolError("'id' must be an integer or a string");
	const answer = await runOrChdir(request, mode);
	// The request id, when there is one, is the reply's first key.
	return id === undefined || id === null ? answer : { id, ...answer };
}

async function runOrChdir(request, mode) {
	// An optional working directory, fixed when the interpreter takes its first cell.
	if (!cwdApplied && typeof request.cwd === 'string') {
		cwdApplied = true;
		try {
			process.chdir(path.resolve('/workspace', request.cwd));
		} catch (e) {
			return protocolError(`cannot change to ${request.cwd}: ${e.message}`);
		}
	}
	cwdApplied = true;
	return runCell(request.code, mode === 'cell');
}

// ------------------------------------------------------------------ the channel

function main() {
	const channel = new net.Socket({ fd: CTL_FD, readable: true, writable: true });
	let buffer = Buffer.alloc(0);
	let tooLarge = false;
	let busy = false;
	const queue = [];

	async function drain() {
		if (busy)
			return;
		busy = true;
		while (queue.length) {
			const line = queue.shift();
			const answer = line === null ? protocolError('request larger than the harness accepts')
				: await handle(line);
			channel.write(JSON.stringify(answer) + '\n');
		}
		busy = false;
	}

	channel.on('data', (chunk) => {
		buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
		let nl;
		while ((nl = buffer.indexOf(10)) >= 0) {
			queue.push(tooLarge ? null : buffer.subarray(0, nl).toString('utf8'));
			tooLarge = false;
			buffer = buffer.subarray(nl + 1);
		}
		if (buffer.length > MAX_REQUEST_BYTES) {
			// Keep memory bounded: drop the line, answer it with an error.
			tooLarge = true;
			buffer = Buffer.alloc(0);
		}
		drain();
	});
	// sessiond closed the channel (or user code broke it): we are done.
	channel.on('end', () => process.exit(0));
	channel.on('error', () => process.exit(0));
}

// Idle, a SIGINT does nothing; while a cell awaits a promise, it ends the wait. A cell
// running synchronously is stopped by breakOnSigint, which takes precedence.
process.on('SIGINT', () => {
	if (running && interruptWait)
		interruptWait(interruption());
});
// Errors of callbacks that run after their cell: report them, keep the context.
process.on('uncaughtException', (e) => {
	process.stderr.write(`Uncaught ${isErrorLike(e) ? userStack(e.stack).join('\n') : util.inspect(e)}\n`);
});
process.on('unhandledRejection', (e) => {
	process.stderr.write(`Unhandled rejection: ${isErrorLike(e) ? userStack(e.stack).join('\n') : util.inspect(e)}\n`);
});

main();
