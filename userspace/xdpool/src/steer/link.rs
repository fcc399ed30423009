//! `BPF_LINK_CREATE` for XDP, called directly so that attaching never falls
//! back to a netlink attachment that would outlive the process.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `BPF_LINK_CREATE` from `enum bpf_cmd`.
const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_LINK_UPDATE` from `enum bpf_cmd`.
const BPF_LINK_UPDATE: libc::c_long = 29;
/// `BPF_F_REPLACE`: update only if the link still runs `old_prog_fd`.
const BPF_F_REPLACE: u32 = 1 << 2;
/// `BPF_XDP` from `enum bpf_attach_type`.
const BPF_XDP: u32 = 37;

/// The `link_create` member of `union bpf_attr`, followed by zeroed space for
/// the per-type union the kernel reads but XDP does not use.
#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    zero: [u64; 4],
}

const _: () = assert!(size_of::<LinkCreateAttr>() == 48);

/// Attaches `prog` to `ifindex` with `XDP_FLAGS_*` `flags` through a bpf_link.
/// Dropping the returned fd (or the process dying) detaches the program.
pub(crate) fn xdp_link_create(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
        zero: [0; 4],
    };
    // SAFETY: `attr` is a valid, fully initialised prefix of `union bpf_attr`
    // for BPF_LINK_CREATE and lives across the call; the kernel only reads
    // `size_of::<LinkCreateAttr>()` bytes of it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            &attr as *const LinkCreateAttr,
            size_of::<LinkCreateAttr>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success BPF_LINK_CREATE returns a new fd that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as i32) })
}

/// The `link_update` member of `union bpf_attr`.
#[repr(C)]
struct LinkUpdateAttr {
    link_fd: u32,
    new_prog_fd: u32,
    flags: u32,
    old_prog_fd: u32,
}

const _: () = assert!(size_of::<LinkUpdateAttr>() == 16);

/// Makes the XDP `link` run `new` instead of `old` in one step: each frame runs
/// one program or the other, none runs neither. Fails (EPERM) if the link no
/// longer runs `old`.
pub(crate) fn xdp_link_update(
    link: BorrowedFd<'_>,
    new: BorrowedFd<'_>,
    old: BorrowedFd<'_>,
) -> io::Result<()> {
    let attr = LinkUpdateAttr {
        link_fd: link.as_raw_fd() as u32,
        new_prog_fd: new.as_raw_fd() as u32,
        flags: BPF_F_REPLACE,
        old_prog_fd: old.as_raw_fd() as u32,
    };
    // SAFETY: `attr` is a valid, fully initialised prefix of `union bpf_attr`
    // for BPF_LINK_UPDATE and lives across the call; the kernel only reads it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_UPDATE,
            &attr as *const LinkUpdateAttr,
            size_of::<LinkUpdateAttr>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
