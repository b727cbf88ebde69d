//! SIGTERM and SIGINT handling: the handler only raises a flag that the run loop and the
//! reporter look at between chunks of work.

use std::sync::atomic::{AtomicBool, Ordering};

/// Raised by SIGTERM or SIGINT.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_signal: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGTERM and SIGINT. The error names the signal.
pub fn install() -> Result<(), String> {
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        // SAFETY: the sigaction struct is zeroed then filled in full; the handler only stores
        // to an atomic, which is async-signal-safe. SA_RESTART keeps reads free of EINTR.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(format!(
                "cannot install a {name} handler: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
